package resultstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cursorflow/cursorflow/internal/resulttest"
	"github.com/cursorflow/cursorflow/internal/testenv"
	"github.com/cursorflow/cursorflow/resultstore"
	"github.com/cursorflow/cursorflow/resultstore/resultstoreurl"
)

// backends opens one store per blob backend a user would run: a
// directory, the S3 server of the test environment, and memory. Each
// works under a prefix of its own.
func backends(t *testing.T) map[string]*resultstore.Store {
	t.Helper()
	ctx := context.Background()
	prefix := "resultstore-test-" + testenv.RandomSuffix(t) + "/"
	open := func(raw string) *resultstore.Store {
		s, err := resultstoreurl.Open(ctx, resulttest.WithPrefix(t, raw, prefix), 0)
		if err != nil {
			t.Fatalf("open %s: %v", raw, err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	stores := map[string]*resultstore.Store{
		"file": open("file://" + filepath.Join(t.TempDir(), "results")),
		"mem":  open("mem://"),
	}
	if os.Getenv(testenv.EnvS3) != "" || os.Getenv("CI") == "true" {
		raw := testenv.S3(t)
		stores["s3"] = open(raw)
		resulttest.DeleteAfter(t, raw, prefix)
	} else {
		t.Logf("%s is not set: the s3 case is skipped", testenv.EnvS3)
	}
	return stores
}

func TestPutGet(t *testing.T) {
	ctx := context.Background()
	big := []byte(`{"rows":"` + strings.Repeat("x", 3<<20) + `"}`) // 3 MB
	for name, s := range backends(t) {
		t.Run(name, func(t *testing.T) {
			ref, err := s.Put(ctx, "exec-1/fetch#1@1", big)
			if err != nil {
				t.Fatal(err)
			}
			if ref.Size != int64(len(big)) || len(ref.SHA256) != 64 || !strings.HasPrefix(ref.URI, s.Base()) {
				t.Fatalf("ref = %+v (base %s)", ref, s.Base())
			}
			if !strings.HasPrefix(ref.URI, name+"://") || !strings.Contains(ref.URI, "/exec-1/fetch_1_1/") {
				t.Fatalf("ref URI %s: want %s:// with the execution and command in its key", ref.URI, name)
			}
			got, err := s.Get(ctx, ref)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != string(big) {
				t.Fatalf("read back %d bytes, want the %d written", len(got), len(big))
			}
			// A retried write of the same result is the same object.
			again, err := s.Put(ctx, "exec-1/fetch#1@1", big)
			if err != nil || again != ref {
				t.Fatalf("second Put = %+v, %v; want %+v", again, err, ref)
			}
			// Another result of the same command is another object.
			other, err := s.Put(ctx, "exec-1/fetch#1@1", []byte(`{"rows":"y"}`))
			if err != nil || other.URI == ref.URI {
				t.Fatalf("other Put = %+v, %v", other, err)
			}
			if got, err := s.Get(ctx, ref); err != nil || len(got) != len(big) {
				t.Fatalf("first object after a second write: %d bytes, %v", len(got), err)
			}
		})
	}
}

func TestGetRefusesWhatDoesNotMatch(t *testing.T) {
	ctx := context.Background()
	for name, s := range backends(t) {
		t.Run(name, func(t *testing.T) {
			ref, err := s.Put(ctx, "exec-2/step#1@1", []byte(`[1,2,3]`))
			if err != nil {
				t.Fatal(err)
			}
			bad := ref
			bad.SHA256 = strings.Repeat("0", 64)
			bad.URI = strings.Replace(ref.URI, ref.SHA256, bad.SHA256, 1)
			if _, err := s.Get(ctx, bad); !errors.Is(err, resultstore.ErrNotFound) {
				t.Fatalf("missing object: err = %v, want ErrNotFound", err)
			}
			wrongSum := ref
			wrongSum.SHA256 = strings.Repeat("a", 64)
			if _, err := s.Get(ctx, wrongSum); !errors.Is(err, resultstore.ErrCorrupt) {
				t.Fatalf("wrong sha256: err = %v, want ErrCorrupt", err)
			}
			wrongSize := ref
			wrongSize.Size++
			if _, err := s.Get(ctx, wrongSize); !errors.Is(err, resultstore.ErrCorrupt) {
				t.Fatalf("wrong size: err = %v, want ErrCorrupt", err)
			}
			for _, uri := range []string{
				"file:///etc/passwd",
				s.Base() + "../../etc/passwd",
				"s3://another-bucket/results/x.json",
				s.Base(),
			} {
				foreign := resultstore.Ref{URI: uri, Size: ref.Size, SHA256: ref.SHA256}
				if _, err := s.Get(ctx, foreign); !errors.Is(err, resultstore.ErrForeign) {
					t.Fatalf("Get(%s): err = %v, want ErrForeign", uri, err)
				}
			}
		})
	}
}

func TestMarker(t *testing.T) {
	ref := resultstore.Ref{URI: "s3://b/results/e/c/x.json", Size: 70000, SHA256: strings.Repeat("ab", 32)}
	b, err := json.Marshal(map[string]any{"data": ref.Marker(), "status": "success"})
	if err != nil {
		t.Fatal(err)
	}
	var back map[string]any
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	got, ok := resultstore.RefOf(back["data"])
	if !ok || got != ref {
		t.Fatalf("RefOf(decoded marker) = %+v, %v; want %+v", got, ok, ref)
	}
	if !resultstore.HasRef(back) || !resultstore.HasRef([]any{1, back}) {
		t.Fatal("HasRef misses a nested marker")
	}
	for _, v := range []any{
		map[string]any{"$ref": "#/components/schemas/Pet"}, // an OpenAPI document is data
		map[string]any{resultstore.MarkerKey: map[string]any{"uri": "x", "size": 1}},
		map[string]any{resultstore.MarkerKey: map[string]any{"uri": "x", "size": 1, "sha256": "short"}},
		map[string]any{resultstore.MarkerKey: ref.Marker()[resultstore.MarkerKey], "other": 1},
		"text", nil, []any{},
	} {
		if _, ok := resultstore.RefOf(v); ok {
			t.Errorf("RefOf(%v) took data for a reference", v)
		}
		if resultstore.HasRef(v) {
			t.Errorf("HasRef(%v) = true", v)
		}
	}
}

func TestOpenErrors(t *testing.T) {
	ctx := context.Background()
	for _, raw := range []string{"", "no-scheme", "file://relative/dir", "mem://?result_threshold=-3", "nosuch://bucket"} {
		if s, err := resultstoreurl.Open(ctx, raw, 0); err == nil {
			_ = s.Close()
			t.Errorf("Open(%q) succeeded", raw)
		}
	}
	s, err := resultstoreurl.Open(ctx, "mem://?result_threshold=100", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Threshold() != 100 {
		t.Fatalf("threshold = %d, want 100 from the URL", s.Threshold())
	}
	s2, err := resultstoreurl.Open(ctx, "mem://?result_threshold=100", 7)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if s2.Threshold() != 7 {
		t.Fatalf("threshold = %d, want 7 from the argument", s2.Threshold())
	}
	if _, err := resultstore.New(resultstore.Config{URL: "mem://"}); !errors.Is(err, resultstore.ErrConfig) {
		t.Fatalf("New without a bucket: %v", err)
	}
}
