package redisstream_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/drivers/redisstream"
	"github.com/cursorflow/cursorflow/internal/drivertest"
	"github.com/cursorflow/cursorflow/internal/testenv"
	"github.com/cursorflow/cursorflow/tools"
	"github.com/cursorflow/cursorflow/tools/fn"
)

// TestPlaybookDeadLetterKeepsLastError drains three entries with
// max_attempts 2 and a body that fails for entry 2 with a distinctive
// message: the engine hands it back twice, and the claim of its third
// delivery lists it dead and, once committed, copies it to the
// dead-letter stream. The dead-letter entry
// must say why the entry died (cursorflow_last_error, the body's error),
// not only that it was delivered too often. Entry 3 fails once and then
// succeeds: once every entry is acknowledged or buried, no last error is
// left behind in Redis.
func TestPlaybookDeadLetterKeepsLastError(t *testing.T) {
	rdb, base := admin(t)
	stream := "e2e_lasterr_" + testenv.RandomSuffix(t) + ":jobs"
	group := "ex9-lasterror"
	errKey := stream + ":cursorflow:last_error:" + group
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	t.Cleanup(func() { _ = rdb.Del(context.Background(), stream, stream+":dead", errKey).Err() })
	ids := fill(t, rdb, stream, 3)

	var entry3Failed atomic.Bool
	body := fn.New(func(_ context.Context, call *tools.Call) (any, error) {
		switch {
		case call.Config["n"] == "2":
			return nil, errors.New("ex9 upstream refused entry 2 (HTTP 418)")
		case call.Config["n"] == "3" && !entry3Failed.Swap(true):
			return nil, errors.New("ex9 entry 3 fails once")
		}
		return nil, nil
	})
	drivertest.Drain(ctx, t, drivertest.DrainConfig{
		PlaybookFile: "testdata/lasterror_drain.yaml",
		Kind:         "redisstream",
		Driver:       redisstream.New(redisstream.Config{}),
		Keychain:     tools.StaticURLs(map[string]string{"redis_queue": base}),
		Workload:     map[string]any{"stream": stream, "group": group},
		Tools:        map[string]tools.Tool{"body": body},
	})

	msgs, err := rdb.XRange(ctx, stream+":dead", "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 1 || msgs[0].Values["cursorflow_id"] != ids[1] {
		t.Fatalf("dead-letter stream %v, want entry %s alone", msgs, ids[1])
	}
	v := msgs[0].Values
	if !strings.Contains(v["cursorflow_reason"].(string), "max_attempts 2") || v["cursorflow_deliveries"] != "3" {
		t.Errorf("dead-letter entry %v, want delivered 3 times, past max_attempts 2", v)
	}
	if got, _ := v["cursorflow_last_error"].(string); !strings.Contains(got, "ex9 upstream refused entry 2 (HTTP 418)") {
		t.Errorf("dead-letter entry's cursorflow_last_error %q, want the body's error (entry %v)", got, v)
	} else {
		t.Logf("cursorflow_last_error: %s", got)
	}
	if n, err := rdb.Exists(ctx, errKey).Result(); err != nil || n != 0 {
		t.Errorf("the last errors' hash %s is left behind (exists %d, err %v)", errKey, n, err)
	}
}
