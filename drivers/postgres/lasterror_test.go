package postgres_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cursorflow/cursorflow/drivers/postgres"
	"github.com/cursorflow/cursorflow/internal/drivertest"
	"github.com/cursorflow/cursorflow/internal/testenv"
	"github.com/cursorflow/cursorflow/tools"
	"github.com/cursorflow/cursorflow/tools/fn"
)

// TestPlaybookDeadLetterKeepsLastError drains a queue with max_attempts 2
// whose body fails for row p2 with a distinctive message that also leaks
// a secret the body resolved. The release statement keeps each failed
// row's error (the errors variable) in last_error, and the dead_letter
// statement, which the claim runs once p2 is past max_attempts, copies
// the row, last_error included, to a dead table. The dead table must say
// why the row died (the body's error, not only "attempts exceeded"),
// with the secret redacted as the event log has it: before, the release
// statement had no error to store and the dead row's last_error was
// NULL.
func TestPlaybookDeadLetterKeepsLastError(t *testing.T) {
	const secret = "pw-9c41d7e2-ex9-secret"
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	base := testenv.Postgres(t)
	db, err := pgxpool.New(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	sfx := testenv.RandomSuffix(t)
	table, dead := "ex9_lasterr_"+sfx, "ex9_lasterr_dead_"+sfx
	_, err = db.Exec(ctx, `CREATE TABLE `+table+` (id bigserial PRIMARY KEY, payload text NOT NULL,
		status text NOT NULL DEFAULT 'pending', attempts int NOT NULL DEFAULT 0, last_error text);
		CREATE TABLE `+dead+` (id bigint PRIMARY KEY, payload text, attempts int, last_error text, reason text);
		INSERT INTO `+table+` (payload) VALUES ('p1'), ('p2'), ('p3')`)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = db.Exec(context.Background(), "DROP TABLE IF EXISTS "+table+", "+dead) })

	body := fn.New(func(ctx context.Context, call *tools.Call) (any, error) {
		if call.Config["payload"] != "p2" {
			return nil, nil
		}
		cred, err := call.Keychain.Resolve(ctx, "api")
		if err != nil {
			return nil, err
		}
		return nil, errors.New("ex9 upstream refused p2 (HTTP 418, token " + cred.Fields["token"] + ")")
	})
	drivertest.Drain(ctx, t, drivertest.DrainConfig{
		PlaybookFile: "testdata/lasterror_drain.yaml",
		Kind:         "postgres",
		Driver:       postgres.New(postgres.Config{}),
		Keychain: tools.StaticKeychain{
			"queue_db": {URL: base},
			"api":      {Fields: map[string]string{"token": secret}},
		},
		Workload: map[string]any{"table": table, "dead": dead},
		Tools:    map[string]tools.Tool{"body": body},
	})

	rows, err := db.Query(ctx, `SELECT payload || ':' || status FROM `+table+` ORDER BY id`)
	if got, want := drivertest.Strings(t, rows, err), []string{"p1:done", "p3:done"}; !slices.Equal(got, want) {
		t.Errorf("queue rows %v, want %v (p2 moved to the dead table)", got, want)
	}
	var payload, reason string
	var attempts int
	var lastError *string
	err = db.QueryRow(ctx, `SELECT payload, attempts, last_error, reason FROM `+dead).Scan(&payload, &attempts, &lastError, &reason)
	if err != nil {
		t.Fatalf("the dead table holds no single row: %v", err)
	}
	if payload != "p2" || attempts != 3 || !strings.Contains(reason, "max_attempts 2") {
		t.Errorf("dead row %s after %d claims, reason %q; want p2 after 3, past max_attempts 2", payload, attempts, reason)
	}
	switch {
	case lastError == nil || !strings.Contains(*lastError, "ex9 upstream refused p2 (HTTP 418"):
		t.Errorf("dead row's last_error %v, want the body's error", lastError)
	case strings.Contains(*lastError, secret) || !strings.Contains(*lastError, tools.Redacted):
		t.Errorf("dead row's last_error %q, want the secret redacted", *lastError)
	default:
		t.Logf("last_error: %s", *lastError)
	}
}
