package natsconsumer_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cursorflow/cursorflow/cursor"
	"github.com/cursorflow/cursorflow/cursor/cursortest"
	"github.com/cursorflow/cursorflow/drivers/internal/deadtest"
	"github.com/cursorflow/cursorflow/drivers/natsconsumer"
	"github.com/cursorflow/cursorflow/internal/testenv"
)

func TestOpenErrors(t *testing.T) {
	tests := []struct {
		name string
		spec cursor.Spec
		want string
		// transient: the failure may pass (the engine tries the open
		// again, as it does a claim), rather than fail the loop at once.
		transient bool
	}{
		{"no stream", cursor.Spec{Credential: "nats://127.0.0.1:1", LoopID: "l"}, `option "stream" is required`, false},
		{"no consumer and no loop", cursor.Spec{Credential: "nats://127.0.0.1:1", Options: map[string]any{"stream": "S"}}, `option "consumer" is required`, false},
		{"empty credential", cursor.Spec{LoopID: "l", Options: map[string]any{"stream": "S"}}, "empty credential", false},
		{"unreachable", cursor.Spec{Credential: "nats://u:hunter2@127.0.0.1:1", LoopID: "l", Options: map[string]any{"stream": "S"}}, "no NATS server available", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := natsconsumer.New(natsconsumer.Config{})
			defer d.Close()
			tt.spec.Kind, tt.spec.Auth = "natsconsumer", "alias"
			_, err := d.Open(context.Background(), tt.spec)
			var ce *cursor.ClaimError
			if !errors.As(err, &ce) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Open: %v, want a ClaimError containing %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Fatalf("error %q leaks the password", err)
			}
			if got := cursor.Transient(err); got != tt.transient {
				t.Fatalf("cursor.Transient(%v) = %v, want %v", err, got, tt.transient)
			}
		})
	}
}

func TestCursorBehaviour(t *testing.T) {
	_, js, base := admin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	drv := natsconsumer.New(natsconsumer.Config{})
	t.Cleanup(func() { _ = drv.Close() })
	prefix := "CB_" + testenv.RandomSuffix(t)
	seq := 0
	newQueue := func(t *testing.T, n int, opts map[string]any) (cursor.Spec, []string) {
		seq++
		name := fmt.Sprintf("%s_%d", prefix, seq)
		seqs := newStreams(t, js, name, n)
		o := map[string]any{"stream": name}
		for k, v := range opts {
			o[k] = strings.ReplaceAll(v.(string), "NAME", name)
		}
		return cursor.Spec{Kind: "natsconsumer", Credential: base, LoopID: "loop-" + name, Options: o, Lease: time.Minute}, seqs
	}
	open := func(t *testing.T, spec cursor.Spec) cursor.Cursor {
		t.Helper()
		cur, err := drv.Open(ctx, spec)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cur.Close() })
		return cur
	}
	claim := func(t *testing.T, cur cursor.Cursor, max int) []cursor.Row {
		t.Helper()
		rows, err := cursortest.ClaimCommitted(ctx, cur, max)
		if err != nil {
			t.Fatal(err)
		}
		return rows
	}
	tests := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"rows and leases", func(t *testing.T) {
			spec, seqs := newQueue(t, 2, nil)
			before := time.Now()
			rows := claim(t, open(t, spec), 5)
			if len(rows) != 2 || rows[0].Key != seqs[0] || rows[0].Values["n"] != int64(1) || rows[0].Values["name"] != "item 1" {
				t.Fatalf("rows %+v", rows)
			}
			l := rows[0].Lease
			if l.Attempt != 1 || !strings.HasPrefix(l.Token, "$JS.ACK.") {
				t.Fatalf("lease %+v", l)
			}
			if d := l.Deadline.Sub(before); d < time.Minute-time.Second || d > time.Minute+time.Second {
				t.Fatalf("deadline %v after the claim, want about a minute", d)
			}
		}},
		{"another cursor acks what one claimed", func(t *testing.T) {
			spec, _ := newQueue(t, 3, nil)
			rows := claim(t, open(t, spec), 3)
			other := open(t, spec)
			if err := other.Ack(ctx, rows); err != nil {
				t.Fatal(err)
			}
			c, err := js.Consumer(ctx, spec.Options["stream"].(string), natsconsumer.ConsumerName(spec.LoopID))
			if err != nil {
				t.Fatal(err)
			}
			info, err := c.Info(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if info.NumAckPending != 0 || info.AckFloor.Stream != 3 {
				t.Fatalf("ack pending %d, ack floor %d; want 0 and 3", info.NumAckPending, info.AckFloor.Stream)
			}
		}},
		{"release redelivers at once", func(t *testing.T) {
			spec, seqs := newQueue(t, 1, nil)
			cur := open(t, spec)
			rows := claim(t, cur, 1)
			if err := cur.Release(ctx, rows); err != nil {
				t.Fatal(err)
			}
			again := claim(t, cur, 1)
			if len(again) != 1 || again[0].Key != seqs[0] || again[0].Lease.Attempt != 2 {
				t.Fatalf("after Release: %+v, want the message with attempt 2", again)
			}
		}},
		{"binds an existing consumer and sets its AckWait", func(t *testing.T) {
			spec, _ := newQueue(t, 1, map[string]any{"consumer": "pre"})
			stream := spec.Options["stream"].(string)
			if _, err := js.CreateConsumer(ctx, stream, jetstream.ConsumerConfig{Durable: "pre", AckPolicy: jetstream.AckExplicitPolicy, AckWait: 5 * time.Second}); err != nil {
				t.Fatal(err)
			}
			if rows := claim(t, open(t, spec), 1); len(rows) != 1 {
				t.Fatalf("claimed %d rows from the bound consumer", len(rows))
			}
			c, err := js.Consumer(ctx, stream, "pre")
			if err != nil {
				t.Fatal(err)
			}
			if got := c.CachedInfo().Config.AckWait; got != time.Minute {
				t.Fatalf("AckWait = %v, want the lease (1m)", got)
			}
		}},
		{"refuses a consumer without explicit acks", func(t *testing.T) {
			spec, _ := newQueue(t, 1, map[string]any{"consumer": "none"})
			if _, err := js.CreateConsumer(ctx, spec.Options["stream"].(string), jetstream.ConsumerConfig{Durable: "none", AckPolicy: jetstream.AckNonePolicy}); err != nil {
				t.Fatal(err)
			}
			if _, err := drv.Open(ctx, spec); err == nil || !strings.Contains(err.Error(), "want explicit") {
				t.Fatalf("Open: %v, want an ack policy error", err)
			}
		}},
		{"a deleted consumer is recreated", func(t *testing.T) {
			spec, seqs := newQueue(t, 2, map[string]any{"consumer": "gone"})
			cur := open(t, spec)
			if err := js.DeleteConsumer(ctx, spec.Options["stream"].(string), "gone"); err != nil {
				t.Fatal(err)
			}
			rows := claim(t, cur, 5)
			if len(rows) != 2 || rows[0].Key != seqs[0] {
				t.Fatalf("after the consumer vanished: %+v", rows)
			}
		}},
		{"filter subject", func(t *testing.T) {
			spec, _ := newQueue(t, 2, map[string]any{"subject": "NAME.other"})
			cur := open(t, spec)
			if rows := claim(t, cur, 5); len(rows) != 0 {
				t.Fatalf("claimed %d rows on a subject with no messages", len(rows))
			}
			ack, err := js.Publish(ctx, spec.Options["stream"].(string)+".other", []byte("hi"))
			if err != nil {
				t.Fatal(err)
			}
			rows := claim(t, cur, 5)
			if len(rows) != 1 || rows[0].Key != fmt.Sprint(ack.Sequence) || rows[0].Values["data"] != "hi" {
				t.Fatalf("rows %+v, want the one message on the filter subject", rows)
			}
		}},
		{"dead letter without a subject terminates", func(t *testing.T) {
			spec, _ := newQueue(t, 1, nil)
			spec.MaxAttempts = 1
			cur := open(t, spec)
			rows := claim(t, cur, 1)
			if err := cur.Release(ctx, rows); err != nil {
				t.Fatal(err)
			}
			if rows := claim(t, cur, 1); len(rows) != 0 {
				t.Fatalf("claimed %+v past max attempts", rows)
			}
			if rows := claim(t, cur, 1); len(rows) != 0 {
				t.Fatalf("a terminated message came back: %+v", rows)
			}
			if dead := deadLettered(t, js, spec.Options["stream"].(string)+"_DEAD"); len(dead) != 0 {
				t.Fatalf("dead-letter stream holds %v without dead_letter_subject", dead)
			}
		}},
		{"a claim reports the messages it dead-letters", func(t *testing.T) {
			// Claim terminates the message past max_attempts and publishes
			// it to the dead letter; the engine learns of it only from
			// Claim.Dead.
			spec, seqs := newQueue(t, 2, map[string]any{"dead_letter_subject": "NAME.dead"})
			spec.MaxAttempts = 2
			// The burying fetch counts a delivery of its own.
			deadtest.ExpectClaimDead(t, drv, spec, seqs, func(ran int) int { return ran + 1 },
				func() []string { return deadLettered(t, js, spec.Options["stream"].(string)+"_DEAD") })
		}},
		{"tokens must be reply subjects", func(t *testing.T) {
			spec, _ := newQueue(t, 1, nil)
			cur := open(t, spec)
			err := cur.Ack(ctx, []cursor.Row{{Key: "1", Lease: cursor.Lease{Token: "some.subject"}}})
			if err == nil || !strings.Contains(err.Error(), "not a JetStream reply subject") {
				t.Fatalf("Ack with a foreign token: %v", err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, tt.run)
	}
}

// TestFinishNothingToRemove: Finish succeeds when the consumer, or the
// stream itself, is gone already (a second Finish, a deleted stream), and
// touches no consumer a cursor block names, nor any when there is no loop
// id.
func TestFinishNothingToRemove(t *testing.T) {
	_, js, base := admin(t)
	ctx := context.Background()
	name := "FINISH_" + testenv.RandomSuffix(t)
	d := natsconsumer.New(natsconsumer.Config{})
	t.Cleanup(func() { _ = d.Close() })
	spec := func(loopID string, opts map[string]any) cursor.Spec {
		return cursor.Spec{Kind: "natsconsumer", Credential: base, LoopID: loopID, Options: opts}
	}
	if err := d.Finish(ctx, spec("exec/start#1", map[string]any{"stream": name})); err != nil {
		t.Fatalf("finish on a stream that does not exist: %v", err)
	}
	newStreams(t, js, name, 1)
	if _, err := js.CreateOrUpdateConsumer(ctx, name, jetstream.ConsumerConfig{Durable: "named", AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
		t.Fatal(err)
	}
	for _, s := range []cursor.Spec{
		spec("exec/start#1", map[string]any{"stream": name}),
		spec("exec/start#1", map[string]any{"stream": name, "consumer": "named"}),
		spec("", map[string]any{"stream": name}),
	} {
		if err := d.Finish(ctx, s); err != nil {
			t.Fatalf("finish %v: %v", s.Options, err)
		}
	}
	if got := consumerNames(t, js, name); len(got) != 1 || got[0] != "named" {
		t.Fatalf("consumers %v, want the named one left", got)
	}
}
