// Command quickstart drains a SQLite work queue through a cursor loop,
// with nothing to install or start: the queue, the event log and the
// engine all live in this process and two files.
//
//	go run ./examples/quickstart            # 10,000 jobs
//	go run ./examples/quickstart -n 100000
//	go run ./examples/quickstart -print     # show the playbook it runs
//
// The first run creates the queue and drains it; a second run finds
// nothing left to do. Delete the directory it names to start over.
package main

import (
	"context"
	"crypto/sha256"
	"database/sql"
	_ "embed"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/term"
	_ "modernc.org/sqlite"

	"github.com/cursorflow/cursorflow/cursor"
	sqlitedriver "github.com/cursorflow/cursorflow/drivers/sqlite"
	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/eventlog"
	eventsqlite "github.com/cursorflow/cursorflow/eventlog/sqlite"
	"github.com/cursorflow/cursorflow/tools"
	"github.com/cursorflow/cursorflow/tools/fn"
	"github.com/cursorflow/cursorflow/tools/noop"
)

//go:embed playbook.yaml
var playbook []byte

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("quickstart", flag.ContinueOnError)
	fs.SetOutput(stderr)
	n := fs.Int("n", 10000, "jobs to create in a new queue")
	dir := fs.String("dir", filepath.Join(os.TempDir(), "cursorflow-quickstart"), "where the queue and the event log live")
	print := fs.Bool("print", false, "print the playbook and exit")
	quiet := fs.Bool("quiet", false, "no live progress (there is none when stdout is not a terminal)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *print {
		_, _ = stdout.Write(playbook)
		return 0
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// Live progress redraws one line: only on a terminal.
	f, isFile := stdout.(*os.File)
	live := !*quiet && isFile && term.IsTerminal(int(f.Fd()))
	if err := quickstart(ctx, *n, *dir, live, stdout); err != nil {
		fmt.Fprintf(stderr, "quickstart: %v\n", err)
		return 1
	}
	return 0
}

func quickstart(ctx context.Context, n int, dir string, progress bool, out io.Writer) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	queuePath := filepath.Join(dir, "queue.db")
	eventsPath := filepath.Join(dir, "events.db")

	queue, err := sql.Open("sqlite", queuePath+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)")
	if err != nil {
		return err
	}
	defer queue.Close()
	queue.SetMaxOpenConns(1) // one writer: the store tool's updates queue up in-process
	total, pending, err := prepareQueue(ctx, queue, n)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "queue     %s: %d jobs, %d pending\n", queuePath, total, pending)

	log, err := eventsqlite.Open(ctx, eventsPath, eventsqlite.Config{})
	if err != nil {
		return err
	}
	defer log.Close()
	// An execution an earlier run left unfinished (interrupted, killed) is
	// resumed, not started afresh: the rows it claimed are on its record.
	unfinished, err := log.Executions(ctx, eventlog.ExecutionsQuery{Unfinished: true})
	if err != nil {
		return err
	}
	if pending == 0 && len(unfinished) == 0 {
		fmt.Fprintf(out, "nothing left to do: every job is done (delete %s to start over)\n", dir)
		return nil
	}

	// The host's own tools: the embedding story in two functions.
	reg := tools.NewRegistry()
	reg.MustRegister("noop", noop.New())
	reg.MustRegister("score", fn.New(func(ctx context.Context, call *tools.Call) (any, error) {
		text, _ := call.Config["text"].(string)
		sum := sha256.Sum256([]byte(text))
		return map[string]any{"score": int64(binary.BigEndian.Uint16(sum[:2]) % 1000)}, nil
	}))
	reg.MustRegister("store", fn.New(func(ctx context.Context, call *tools.Call) (any, error) {
		res, err := queue.ExecContext(ctx, `UPDATE jobs SET status = 'done', result = ?, done_at = unixepoch() WHERE id = ?`,
			call.Config["result"], call.Config["id"])
		if err != nil {
			return nil, err
		}
		n, _ := res.RowsAffected()
		return map[string]any{"updated": n}, nil
	}))
	cursors := cursor.NewRegistry()
	if err := cursors.Register("sqlite", sqlitedriver.New(sqlitedriver.Config{})); err != nil {
		return err
	}
	defer cursors.Close()

	e, err := engine.New(engine.Config{
		Log: log, Tools: reg, Cursors: cursors,
		Keychain: tools.StaticURLs(map[string]string{"queue": queuePath}),
		Logger:   slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		return err
	}
	defer e.Close()

	start := time.Now()
	var id string
	if len(unfinished) > 0 {
		id = unfinished[len(unfinished)-1]
		if err := e.Resume(ctx, id); err != nil {
			return err
		}
		fmt.Fprintf(out, "execution %s, resumed where an earlier run stopped\n", id)
	} else {
		if id, err = e.Start(ctx, playbook, engine.StartOptions{File: "quickstart/playbook.yaml"}); err != nil {
			return err
		}
		fmt.Fprintf(out, "execution %s\n", id)
	}
	done := make(chan struct{})
	if progress {
		go showProgress(ctx, queue, pending, start, done, out)
	}
	sum, err := e.Wait(ctx, id)
	close(done)
	if err != nil {
		if ctx.Err() != nil {
			// Interrupted: let the running frames finish and record them
			// (a second interrupt stops them at once), so that the next
			// run resumes exactly where this one stopped.
			fmt.Fprintln(out, "\ninterrupted: letting the running frames finish (interrupt again to stop now)")
			sctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			sctx, cancel := context.WithTimeout(sctx, 30*time.Second)
			defer cancel()
			_ = e.Shutdown(sctx)
			return fmt.Errorf("%w: run the quickstart again to resume execution %s", err, id)
		}
		return err
	}
	elapsed := time.Since(start)
	st, err := engine.Inspect(ctx, log, id)
	if err != nil {
		return err
	}
	if sum.Status != engine.StatusCompleted {
		return fmt.Errorf("execution %s ended %s at step %s (%s): %s", id, sum.Status, sum.Step, sum.Field, sum.Error)
	}
	ls := st.Loops["start#1"]
	if progress {
		fmt.Fprintf(out, "\r%s\n", strings.Repeat(" ", 60)) // clears the progress line
	}
	fmt.Fprintf(out, "items           %d (%d ok, %d failed, %d dead-lettered)\n", ls.Rows, ls.OK, ls.Failed, ls.Dead)
	fmt.Fprintf(out, "items/s         %.0f\n", float64(ls.Rows)/elapsed.Seconds())
	fmt.Fprintf(out, "frames          %d\n", ls.Frames)
	fmt.Fprintf(out, "event rows      %d\n", st.Events)
	if ls.Rows > 0 {
		fmt.Fprintf(out, "events per item %.3f\n", float64(st.Events)/float64(ls.Rows))
	}
	fmt.Fprintf(out, "event log       %s\n", eventsPath)
	fmt.Fprintf(out, "inspect it      go run ./examples/cursorflow status %s --eventlog sqlite:%s\n", id, eventsPath)
	fmt.Fprintf(out, "wall time       %s\n", elapsed.Round(time.Millisecond))
	return nil
}

// prepareQueue creates the jobs table with n pending jobs if it does not
// exist, and returns the number of jobs and of jobs not yet done.
func prepareQueue(ctx context.Context, db *sql.DB, n int) (total, pending int, err error) {
	_, err = db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS jobs (
		id INTEGER PRIMARY KEY,
		payload TEXT NOT NULL,
		status TEXT NOT NULL DEFAULT 'pending',
		attempts INTEGER NOT NULL DEFAULT 0,
		claimed_at INTEGER,
		done_at INTEGER,
		result INTEGER)`)
	if err != nil {
		return 0, 0, err
	}
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM jobs`).Scan(&total); err != nil {
		return 0, 0, err
	}
	if total == 0 {
		_, err = db.ExecContext(ctx, `WITH RECURSIVE seq(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM seq WHERE i < ?)
			INSERT INTO jobs (id, payload) SELECT i, 'job-' || i FROM seq`, n)
		if err != nil {
			return 0, 0, err
		}
		total = n
	}
	err = db.QueryRowContext(ctx, `SELECT count(*) FROM jobs WHERE status <> 'done'`).Scan(&pending)
	if errors.Is(err, sql.ErrNoRows) {
		err = nil
	}
	return total, pending, err
}

func showProgress(ctx context.Context, db *sql.DB, pending int, start time.Time, done <-chan struct{}, out io.Writer) {
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-ctx.Done():
			return
		case <-t.C:
			var left int
			if err := db.QueryRowContext(ctx, `SELECT count(*) FROM jobs WHERE status <> 'done'`).Scan(&left); err != nil {
				continue
			}
			processed := pending - left
			rate := float64(processed) / time.Since(start).Seconds()
			fmt.Fprintf(out, "\rdone %d/%d  %.0f items/s   ", processed, pending, rate)
		}
	}
}
