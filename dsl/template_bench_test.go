package dsl

import "testing"

// saveRecordSQL is the save_record command of
// noetl-playbooks/pft_flow_test/test_pft_flow_v2.yaml: the per-row SQL the
// cursor workers render.
const saveRecordSQL = `WITH save_page AS (
  INSERT INTO public.pft_test_patient_assessments (pcc_patient_id, facility_mapping_id, page_number, payload, is_last_page)
  VALUES (
    {{ iter.patient.patient_id | int }},
    {{ iter.patient.facility_mapping_id | int }},
    1,
    '{{ iter.page_payload | tojson | replace("'", "''") }}'::jsonb,
    COALESCE(('{{ iter.page_payload | tojson | replace("'", "''") }}'::jsonb->'paging'->>'isLastPage')::boolean, TRUE)
  )
  ON CONFLICT (pcc_patient_id, facility_mapping_id, page_number) DO UPDATE SET
    payload = EXCLUDED.payload,
    is_last_page = EXCLUDED.is_last_page
),
mark_done AS (
  UPDATE public.pft_test_patient_work_queue q
  SET status = 'done',
      done_at = NOW(),
      worker_id = NULL,
      claimed_at = NULL,
      updated_at = NOW()
  WHERE q.execution_id = '{{ execution_id }}'
    AND q.facility_mapping_id = {{ iter.patient.facility_mapping_id | int }}
    AND q.data_type = 'assessments'
    AND q.patient_id = {{ iter.patient.patient_id | int }}
)
SELECT 1 AS ok;
`

// benchVars is a render context shaped like the engine's for one row of a
// cursor loop.
func benchVars() map[string]any {
	return map[string]any{
		"workload":     map[string]any{"patients_per_facility": int64(100), "page_size": int64(50)},
		"ctx":          map[string]any{"facility_mapping_id": int64(7)},
		"vars":         map[string]any{},
		"execution_id": "exec-0001",
		"iter": map[string]any{
			"_index":  int64(3),
			"job":     map[string]any{"id": int64(42), "payload": "it's \u00e9", "n": 1.5},
			"patient": map[string]any{"patient_id": "1234", "facility_mapping_id": int64(7)},
			"page_payload": map[string]any{
				"data": []any{
					map[string]any{"assessmentId": int64(1), "note": "patient's note <ok>", "score": 3.5},
					map[string]any{"assessmentId": int64(2), "note": "second", "score": int64(4)},
				},
				"paging": map[string]any{"page": int64(1), "isLastPage": true},
			},
		},
		"output": map[string]any{"status": "success", "data": map[string]any{"row_count": int64(1), "rows": []any{map[string]any{"data_count": "12"}}}},
	}
}

func benchTemplate(b *testing.B, src string) {
	tp, err := CompileTemplate(src, Pos{Line: 1, Col: 1})
	if err != nil {
		b.Fatal(err)
	}
	vars := benchVars()
	if _, err := tp.Render(vars); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := tp.Render(vars); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRenderConstant(b *testing.B) { benchTemplate(b, "SELECT 1 AS ok") }

func BenchmarkRenderNativeInt(b *testing.B) {
	benchTemplate(b, "{{ iter.patient.patient_id | int }}")
}

func BenchmarkRenderSaveRecordSQL(b *testing.B) { benchTemplate(b, saveRecordSQL) }

func BenchmarkTruthyWhenGuard(b *testing.B) {
	tp, err := CompileTemplate("{{ (output.data.rows[0].data_count | default(0) | int) < (workload.patients_per_facility | int) }}", Pos{Line: 1, Col: 1})
	if err != nil {
		b.Fatal(err)
	}
	vars := benchVars()
	b.ReportAllocs()
	for b.Loop() {
		ok, err := tp.Truthy(vars)
		if err != nil || !ok {
			b.Fatal(ok, err)
		}
	}
}

func BenchmarkRenderNativeParallel(b *testing.B) {
	tp, err := CompileTemplate("{{ iter.patient.patient_id | int }}", Pos{Line: 1, Col: 1})
	if err != nil {
		b.Fatal(err)
	}
	vars := benchVars()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := tp.Render(vars); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func BenchmarkValueRenderMapArgs(b *testing.B) {
	id, _ := NewScalarValue("{{ iter.patient.patient_id | int }}", Pos{Line: 1, Col: 1})
	name, _ := NewScalarValue("patient-{{ iter._index }}", Pos{Line: 2, Col: 1})
	args := map[string]*Value{
		"patient_id": id,
		"name":       name,
		"limit":      NewLiteralValue(int64(10), Pos{Line: 3, Col: 1}),
		"mode":       mustScalar(b, "fast"),
	}
	vars := benchVars()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := RenderMap(args, vars); err != nil {
			b.Fatal(err)
		}
	}
}

func mustScalar(tb testing.TB, s string) *Value {
	tb.Helper()
	v, err := NewScalarValue(s, Pos{Line: 1, Col: 1})
	if err != nil {
		tb.Fatal(err)
	}
	return v
}

// The bench program's per-row templates (examples/bench).
func BenchmarkRenderIterJobID(b *testing.B) { benchTemplate(b, "{{ iter.job.id }}") }

func BenchmarkRenderIterJobSQLLiteral(b *testing.B) {
	benchTemplate(b, "{{ iter.job | tojson | sql_literal }}")
}

// BenchmarkRenderFrameToJSON renders a frame body's rows as the bench
// program's frame mode does: 100 claimed rows of an id and a payload,
// through tojson and sql_literal, once per frame.
func BenchmarkRenderFrameToJSON(b *testing.B) {
	tp, err := CompileTemplate("UPDATE q SET status = 'done' FROM jsonb_to_recordset({{ iter.job | tojson | sql_literal }}::jsonb) AS r(id bigint) WHERE q.id = r.id", Pos{Line: 1, Col: 1})
	if err != nil {
		b.Fatal(err)
	}
	rows := make([]any, 100)
	for i := range rows {
		rows[i] = map[string]any{"id": int64(1000 + i), "payload": "payload-" + string(rune('a'+i%26))}
	}
	vars := map[string]any{"iter": map[string]any{"job": rows}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tp.Render(vars); err != nil {
			b.Fatal(err)
		}
	}
}
