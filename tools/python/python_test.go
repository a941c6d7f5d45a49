package python_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/tools"
	"github.com/cursorflow/cursorflow/tools/python"
)

// interpreter skips the test when python3 is absent (fails under CI=true).
func interpreter(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("python3")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("python3 is required under CI=true")
		}
		t.Skip("python3 not found")
	}
	return p
}

func TestExecute(t *testing.T) {
	t.Parallel()
	tool := python.New(python.Config{Python: interpreter(t)})
	tests := []struct {
		name   string
		config map[string]any
		args   map[string]any
		status string
		want   any
		errHas []string
	}{
		{
			name: "noetl loop_test: top-level return, input keys bound as variables",
			config: map[string]any{"input": map[string]any{}, "code": `num = input_data.get('num')
loop_index = input_data.get('loop_index', 0)
print(f"[LOOP] Processing number {num} at index {loop_index}")
result = num * 2
return {"number": num, "doubled": result, "index": loop_index}
`},
			args:   map[string]any{"num": int64(3), "loop_index": int64(2)},
			status: tools.StatusSuccess,
			want:   map[string]any{"number": int64(3), "doubled": int64(6), "index": int64(2)},
		},
		{
			name: "result variable, reassigning an input name",
			config: map[string]any{"code": `import json
if isinstance(process_result, str):
    process_result = json.loads(process_result)
result = {"code": process_result.get("status_code"), "total": sum(n for n in [1, 2, 3])}
`},
			args:   map[string]any{"process_result": `{"status_code": 200}`},
			status: tools.StatusSuccess,
			want:   map[string]any{"code": int64(200), "total": int64(6)},
		},
		{
			// JSON has no number for them: they come back as the
			// strings the engine records them as, not as a failure to
			// read the result.
			name:   "NaN and infinities",
			config: map[string]any{"code": "return {'nan': float('nan'), 'big': [float('inf'), -float('inf')], 'x': 1.5}"},
			status: tools.StatusSuccess,
			want:   map[string]any{"nan": "NaN", "big": []any{"+Inf", "-Inf"}, "x": 1.5},
		},
		{
			name:   "config input overrides step args",
			config: map[string]any{"input": map[string]any{"x": "config"}, "code": "return [x, y, input_data['x']]"},
			args:   map[string]any{"x": "step", "y": 1.5},
			status: tools.StatusSuccess,
			want:   []any{"config", 1.5, "config"},
		},
		{
			// NoETL's pagination playbooks (retry, max_iterations) pass
			// `input: {input_data: "{{ ctx.collected_data }}"}` and read
			// input_data as that list.
			name:   "an input named input_data is that input, not the whole map",
			config: map[string]any{"input": map[string]any{"input_data": []any{int64(1), int64(2)}, "n": int64(3)}, "code": "return [input_data, n]"},
			status: tools.StatusSuccess,
			want:   []any{[]any{int64(1), int64(2)}, int64(3)},
		},
		{
			name: "def main style",
			config: map[string]any{"code": `def main(a, b):
    return {"sum": a + b}
`},
			args:   map[string]any{"a": int64(2), "b": int64(5)},
			status: tools.StatusSuccess,
			want:   map[string]any{"sum": int64(7)},
		},
		{
			name:   "libs imported under their alias",
			config: map[string]any{"libs": map[string]any{"m": "math"}, "code": "result = m.floor(2.7)"},
			status: tools.StatusSuccess,
			want:   int64(2),
		},
		{
			name:   "no result is null",
			config: map[string]any{"code": "x = 1"},
			status: tools.StatusSuccess,
			want:   nil,
		},
		{
			name:   "unserialisable values become strings",
			config: map[string]any{"code": "import datetime\nreturn {'d': datetime.date(2024, 1, 2)}"},
			status: tools.StatusSuccess,
			want:   map[string]any{"d": "2024-01-02"},
		},
		{
			name:   "multi-line string literal is left intact",
			config: map[string]any{"code": "s = '''a\nb'''\nreturn s"},
			status: tools.StatusSuccess,
			want:   "a\nb",
		},
		{
			name: "exception",
			config: map[string]any{"code": `def inner():
    raise ValueError(f"Random failure (value: {7})")
inner()
`},
			status: tools.StatusError,
			errHas: []string{"ValueError: Random failure (value: 7)", `File "<code>", line 3, in <module>`, `File "<code>", line 2, in inner`, "raise ValueError"},
		},
		{
			name:   "syntax error",
			config: map[string]any{"code": "return (1,"},
			status: tools.StatusError,
			errHas: []string{"SyntaxError"},
		},
		{
			name:   "sys.exit without result",
			config: map[string]any{"code": "import os\nos._exit(3)"},
			status: tools.StatusError,
			errHas: []string{"exit status 3"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			out, err := tool.Execute(context.Background(), &tools.Call{Kind: "python", Config: tt.config, Args: tt.args})
			if err != nil {
				t.Fatalf("Execute: %v", err)
			}
			if out.Status != tt.status {
				t.Fatalf("status %q (error %q), want %q", out.Status, out.Error, tt.status)
			}
			if tt.status == tools.StatusSuccess && !reflect.DeepEqual(out.Data, tt.want) {
				t.Errorf("data %#v, want %#v", out.Data, tt.want)
			}
			for _, s := range tt.errHas {
				if !strings.Contains(out.Error, s) {
					t.Errorf("error %q lacks %q", out.Error, s)
				}
			}
			if strings.Contains(out.Error, `File "<string>"`) {
				t.Errorf("error leaks driver frames: %q", out.Error)
			}
		})
	}
}

func TestTimeoutAndConfig(t *testing.T) {
	t.Parallel()
	tool := python.New(python.Config{Python: interpreter(t)})

	start := time.Now()
	out, err := tool.Execute(context.Background(), &tools.Call{Config: map[string]any{"code": "import time\ntime.sleep(30)", "timeout": 0.5}})
	if err != nil || out.Status != tools.StatusError || !strings.Contains(out.Error, "deadline") {
		t.Errorf("timeout: %v %+v", err, out)
	}
	if time.Since(start) > 10*time.Second {
		t.Errorf("timeout took %s", time.Since(start))
	}

	if _, err := tool.Execute(context.Background(), &tools.Call{Config: map[string]any{}}); !errors.Is(err, python.ErrBadConfig) {
		t.Errorf("missing code: %v", err)
	}
	missing := python.New(python.Config{Python: "/nonexistent/python"})
	out, err = missing.Execute(context.Background(), &tools.Call{Config: map[string]any{"code": "return 1"}})
	if err != nil || out.Status != tools.StatusError || !strings.Contains(out.Error, "/nonexistent/python") {
		t.Errorf("missing interpreter: %v %+v", err, out)
	}
}

func TestCredentialsNotInherited(t *testing.T) {
	t.Setenv("CURSORFLOW_CREDENTIAL_PG", "postgres://u:secret@h/db")
	tool := python.New(python.Config{Python: interpreter(t), Env: []string{"EXTRA=1"}})
	out, err := tool.Execute(context.Background(), &tools.Call{Config: map[string]any{"code": "import os\nreturn [os.environ.get('CURSORFLOW_CREDENTIAL_PG'), os.environ.get('EXTRA')]"}})
	if err != nil || out.Status != tools.StatusSuccess {
		t.Fatalf("%v %+v", err, out)
	}
	if want := []any{nil, "1"}; !reflect.DeepEqual(out.Data, want) {
		t.Errorf("env seen by code %v, want %v", out.Data, want)
	}
}

// TestLargeResults returns results far larger than a pipe's buffer: they
// come back whole, and one over Config.MaxResult fails at once with an
// error that says so instead of leaving the child blocked on its write.
func TestLargeResults(t *testing.T) {
	t.Parallel()
	tool := python.New(python.Config{Python: interpreter(t)})
	for _, mb := range []int{3, 20} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		out, err := tool.Execute(ctx, &tools.Call{Config: map[string]any{"code": "return 'x' * n"}, Args: map[string]any{"n": int64(mb << 20)}})
		cancel()
		if err != nil || out.Status != tools.StatusSuccess {
			t.Fatalf("%d MB: %v %s", mb, err, out.Error)
		}
		if s, _ := out.Data.(string); len(s) != mb<<20 || strings.Trim(s, "x") != "" {
			t.Fatalf("%d MB: got %d bytes back", mb, len(s))
		}
	}

	small := python.New(python.Config{Python: interpreter(t), MaxResult: 1 << 20})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := small.Execute(ctx, &tools.Call{Config: map[string]any{"code": "return 'x' * (3 << 20)"}})
	if err != nil || out.Status != tools.StatusError || !strings.Contains(out.Error, "larger than 1048576 bytes") {
		t.Fatalf("oversized result: %v %+v", err, out.Error)
	}
	if ctx.Err() != nil {
		t.Fatal("the oversized result hung until the test's deadline")
	}
}

// TestTimeoutIsMarked: code its own timeout stops says so in its data
// (timeout: true), as the http and postgres tools do, so that a policy
// rule on output.error.kind == 'timeout' matches it.
func TestTimeoutIsMarked(t *testing.T) {
	t.Parallel()
	tool := python.New(python.Config{Python: interpreter(t)})
	out, err := tool.Execute(context.Background(), &tools.Call{Config: map[string]any{"code": "import time\ntime.sleep(20)", "timeout": 0.5}})
	if err != nil {
		t.Fatalf("Execute: %v", err)
	}
	if d, _ := out.Data.(map[string]any); out.Status != tools.StatusError || d["timeout"] != true {
		t.Fatalf("status %q data %v, want an error marked timeout", out.Status, out.Data)
	}
	if want := "python: timed out after 500ms: context deadline exceeded"; out.Error != want {
		t.Fatalf("error %q, want %q", out.Error, want)
	}
}
