package sqllog

import (
	"testing"
	"testing/fstest"
)

func TestLoadMigrations(t *testing.T) {
	t.Parallel()
	ms, err := LoadMigrations(fstest.MapFS{
		"m/0010_later.sql": {Data: []byte("B")},
		"m/0002_first.sql": {Data: []byte("A")},
	}, "m")
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 2 || ms[0] != (Migration{2, "0002_first.sql", "A"}) || ms[1] != (Migration{10, "0010_later.sql", "B"}) {
		t.Fatalf("got %+v", ms)
	}
	if _, err := LoadMigrations(fstest.MapFS{"m/init.sql": {}}, "m"); err == nil {
		t.Fatal("want an error for a name without a version")
	}
}
