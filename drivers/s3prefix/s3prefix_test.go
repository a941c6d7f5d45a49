package s3prefix

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/cursorflow/cursorflow/cursor"
	"github.com/cursorflow/cursorflow/drivers/internal/clientcache"
)

func TestParseOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   map[string]any
		want Options
		err  string
	}{
		{"defaults", nil, Options{Prefix: "pending/", DonePrefix: "done/", LeasePrefix: "leases/", DeadPrefix: "dead/", MaxBodyBytes: DefaultMaxBodyBytes}, ""},
		{"nested prefix", map[string]any{"prefix": "jobs/pending/"},
			Options{Prefix: "jobs/pending/", DonePrefix: "jobs/done/", LeasePrefix: "jobs/leases/", DeadPrefix: "jobs/dead/", MaxBodyBytes: DefaultMaxBodyBytes}, ""},
		{"explicit", map[string]any{"prefix": "in/", "done_prefix": "out/", "lease_prefix": "l/", "dead_prefix": "d/",
			"read_body": "true", "body_json": true, "max_body_bytes": 10.0},
			Options{Prefix: "in/", DonePrefix: "out/", LeasePrefix: "l/", DeadPrefix: "d/", ReadBody: true, BodyJSON: true, MaxBodyBytes: 10}, ""},
		{"empty prefix", map[string]any{"prefix": ""}, Options{}, "prefix: empty"},
		{"overlap", map[string]any{"prefix": "q/", "done_prefix": "q/done/"}, Options{}, "overlap"},
		{"bad bool", map[string]any{"read_body": "yes please"}, Options{}, "read_body"},
		{"bad int", map[string]any{"max_body_bytes": 1.5}, Options{}, "max_body_bytes"},
		{"zero max", map[string]any{"max_body_bytes": 0}, Options{}, "at least 1"},
		{"prefix type", map[string]any{"prefix": 3}, Options{}, "want a string"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseOptions(tc.in, nil)
			if tc.err != "" {
				if err == nil || !errors.Is(err, ErrOption) || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want ErrOption mentioning %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestMarkerKeys(t *testing.T) {
	for _, tc := range []struct {
		key  string
		name string
		gen  int64
		ok   bool
	}{
		{markerKey("l/", "a", 1), "a", 1, true},
		{markerKey("l/", "dir/x.json", 42), "dir/x.json", 42, true},
		{markerKey("l/", "a#0000000001", 3), "a#0000000001", 3, true},
		{"l/a#1", "", 0, false},
		{"l/a#00000000x1", "", 0, false},
		{"l/#0000000001", "", 0, false},
		{"other/a#0000000001", "", 0, false},
		{"l/a#0000000000", "", 0, false},
	} {
		name, gen, ok := parseMarkerKey("l/", tc.key)
		if name != tc.name || gen != tc.gen || ok != tc.ok {
			t.Errorf("parseMarkerKey(%q) = %q, %d, %v; want %q, %d, %v", tc.key, name, gen, ok, tc.name, tc.gen, tc.ok)
		}
	}
}

// TestMarkerNames: a name keeps its markers under itself while the
// marker key fits the bucket's limits (1024-byte keys, 255-byte path
// segments), so that markers written before hashing existed stay the
// row's; beyond them, and for names of the hashed form itself, markers go
// under a fixed-length hash that no other name maps to.
func TestMarkerNames(t *testing.T) {
	seg := func(n int) string { return strings.Repeat("s", n) }
	deep := strings.Repeat(seg(200)+"/", 4) // 804 bytes
	hashed := markerName("l/", seg(245))
	for _, tc := range []struct {
		prefix, name string
		plain        bool
	}{
		{"l/", "a.json", true},
		{"l/", seg(244), true},          // last segment 244+11 = 255
		{"l/", seg(245), false},         // 256
		{"l/", "dir/" + seg(244), true}, // per segment
		{"lease-", seg(238), true},      // the prefix's tail is in the segment
		{"lease-", seg(239), false},     // 6+239+11 = 256
		{"l/", deep + seg(1024-2-11-804), true},
		{"l/", deep + seg(1024-2-11-804+1), false},
		{"l/", "#sha256:x", true},
		{"l/", hashed, false},
	} {
		got := markerName(tc.prefix, tc.name)
		if (got == tc.name) != tc.plain {
			t.Errorf("markerName(%q, %d-byte name) = %q, want plain %v", tc.prefix, len(tc.name), got, tc.plain)
		}
		key := markerKey(tc.prefix, tc.name, maxGen-1)
		if seg := key[strings.LastIndexByte(key, '/')+1:]; len(key) > maxKeyBytes || len(seg) > maxSegmentBytes {
			t.Errorf("markerKey(%q, %d-byte name) is %d bytes, last segment %d", tc.prefix, len(tc.name), len(key), len(seg))
		}
		if name, gen, ok := parseMarkerKey(tc.prefix, key); !ok || name != got || gen != maxGen-1 {
			t.Errorf("parseMarkerKey(markerKey(%q, %d-byte name)) = %q, %d, %v", tc.prefix, len(tc.name), name, gen, ok)
		}
	}
	if !isHashedName(hashed) || markerName("l/", hashed) == hashed {
		t.Errorf("the hashed name %q maps to itself", hashed)
	}
}

func TestTokens(t *testing.T) {
	for _, tc := range []struct {
		tok string
		gen int64
		ok  bool
	}{{"1", 1, true}, {"17", 17, true}, {"0", 0, false}, {"", 0, false}, {"x", 0, false}, {"-3", 0, false}} {
		gen, err := parseToken(tc.tok)
		if (err == nil) != tc.ok || gen != tc.gen {
			t.Errorf("parseToken(%q) = %d, %v", tc.tok, gen, err)
		}
		if err != nil && !errors.Is(err, errBadToken) {
			t.Errorf("parseToken(%q): %v is not errBadToken", tc.tok, err)
		}
	}
	if got, _ := parseToken(token(99)); got != 99 {
		t.Errorf("token round trip: %d", got)
	}
}

func TestMarkerCodec(t *testing.T) {
	m := marker{State: stateLeased, Attempt: 2, Expires: 1234}
	got, err := decodeMarker(m.encode())
	if err != nil || got != m {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	for _, bad := range []string{`{`, `{"state":"weird"}`, `[]`} {
		if _, err := decodeMarker([]byte(bad)); err == nil {
			t.Errorf("decodeMarker(%s) accepted", bad)
		}
	}
}

func TestRawKey(t *testing.T) {
	for k, want := range map[string]bool{"a/b": true, "a/../b": false, "x__0x41": false, "tab\tkey": false, "ünï": true} {
		if rawKey(k) != want {
			t.Errorf("rawKey(%q) = %v", k, !want)
		}
	}
}

func TestRefusesFileBlob(t *testing.T) {
	d := New(Config{})
	defer d.Close()
	_, _, err := d.bucket(t.Context(), "file:///tmp/q")
	if !errors.Is(err, ErrRacyBucket) {
		t.Fatalf("err = %v, want ErrRacyBucket", err)
	}
	if _, _, err := d.bucket(t.Context(), "::not a url"); err == nil || strings.Contains(err.Error(), "::not") {
		t.Fatalf("err = %v, want an error that does not quote the URL", err)
	}
}

// A url option may name a bucket per execution: the buckets no cursor
// holds are closed past clientcache.MaxIdle of them, so a driver that met
// many URLs does not keep a handle for each; one an open cursor holds
// stays open.
func TestURLBucketsNoCursorHoldsAreClosed(t *testing.T) {
	d := New(Config{})
	defer d.Close()
	// gocloud's in-memory buckets, one per URL.
	open := func(name string) cursor.Cursor {
		t.Helper()
		c, err := d.Open(t.Context(), cursor.Spec{Kind: "s3prefix", Options: map[string]any{OptURL: "mem://" + name}})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	held := open("held")
	for i := range 3 * clientcache.MaxIdle {
		if err := open(fmt.Sprintf("b%d", i)).Close(); err != nil {
			t.Fatal(err)
		}
	}
	if n := d.buckets.Len(); n != clientcache.MaxIdle+1 {
		t.Fatalf("driver holds %d buckets after %d URLs, want %d idle and the held one", n, 3*clientcache.MaxIdle+1, clientcache.MaxIdle)
	}
	// The held cursor's bucket is still open: a claim lists it.
	if _, err := held.Claim(t.Context(), 1); err != nil {
		t.Fatalf("claim on the held cursor: %v", err)
	}
	_ = held.Close()
}
