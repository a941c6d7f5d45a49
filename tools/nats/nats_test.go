package nats_test

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cursorflow/cursorflow/internal/testenv"
	"github.com/cursorflow/cursorflow/tools"
	"github.com/cursorflow/cursorflow/tools/nats"
)

func setup(t *testing.T) (*nats.Tool, tools.Keychain, jetstream.JetStream, string) {
	t.Helper()
	url := testenv.NATS(t)
	tool := nats.New(nats.Config{})
	t.Cleanup(func() { _ = tool.Close() })
	nc, err := natsgo.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return tool, tools.StaticURLs(map[string]string{"nats_e2e": url}), js, testenv.RandomSuffix(t)
}

func exec(t *testing.T, tool *nats.Tool, kc tools.Keychain, cfg map[string]any) map[string]any {
	t.Helper()
	cfg["auth"] = "nats_e2e"
	out, err := tool.Execute(context.Background(), &tools.Call{Config: cfg, Keychain: kc})
	if err != nil {
		t.Fatalf("%v: %v", cfg["operation"], err)
	}
	if out.Status != tools.StatusSuccess {
		t.Fatalf("%v: %+v", cfg["operation"], out)
	}
	return out.Data.(map[string]any)
}

func TestKeyValue(t *testing.T) {
	t.Parallel()
	tool, kc, js, sfx := setup(t)
	bucket := "cf_kv_" + sfx
	t.Cleanup(func() { _ = js.DeleteKeyValue(context.Background(), bucket) })

	miss := exec(t, tool, kc, map[string]any{"operation": "kv_put", "bucket": bucket, "key": "user_1", "value": map[string]any{"id": int64(1), "name": "ann"}})
	if miss["status"] != "success" || miss["revision"] != int64(1) {
		t.Fatalf("kv_put into a new bucket = %#v", miss)
	}
	exec(t, tool, kc, map[string]any{"operation": "kv_put", "bucket": bucket, "key": "user_2", "value": "plain text"})
	got := exec(t, tool, kc, map[string]any{"operation": "kv_get", "bucket": bucket, "key": "user_1"})
	if got["status"] != "success" || !reflect.DeepEqual(got["value"], map[string]any{"id": int64(1), "name": "ann"}) || got["revision"] != int64(1) {
		t.Errorf("kv_get = %#v", got)
	}
	// What the tool stored is what any NATS client reads.
	kv, err := js.KeyValue(context.Background(), bucket)
	if err != nil {
		t.Fatal(err)
	}
	e, err := kv.Get(context.Background(), "user_2")
	if err != nil || string(e.Value()) != "plain text" {
		t.Errorf("stored value %q, %v", e.Value(), err)
	}
	keys := exec(t, tool, kc, map[string]any{"operation": "kv_keys", "bucket": bucket, "pattern": "user_*"})
	if keys["count"] != int64(2) {
		t.Errorf("kv_keys = %#v", keys)
	}
	exec(t, tool, kc, map[string]any{"operation": "kv_delete", "bucket": bucket, "key": "user_1"})
	gone := exec(t, tool, kc, map[string]any{"operation": "kv_get", "bucket": bucket, "key": "user_1"})
	if gone["status"] != "not_found" || gone["value"] != nil {
		t.Errorf("kv_get after delete = %#v", gone)
	}
}

func TestPublish(t *testing.T) {
	t.Parallel()
	tool, kc, js, sfx := setup(t)
	ctx := context.Background()
	stream := "CF_EVENTS_" + sfx
	subject := "cf.events." + sfx
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: stream, Subjects: []string{subject + ".>"}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = js.DeleteStream(context.Background(), stream) })

	ack := exec(t, tool, kc, map[string]any{"operation": "js_publish", "stream": stream, "subject": subject + ".created",
		"data": map[string]any{"user_id": int64(7)}, "headers": map[string]any{"X-Correlation-ID": "exec-1"}})
	if ack["stream"] != stream || ack["seq"] != int64(1) || ack["duplicate"] != false {
		t.Fatalf("js_publish = %#v", ack)
	}
	msg := exec(t, tool, kc, map[string]any{"operation": "js_get_msg", "stream": stream, "subject": subject + ".created"})
	if !reflect.DeepEqual(msg["data"], map[string]any{"user_id": int64(7)}) || msg["seq"] != int64(1) ||
		!reflect.DeepEqual(msg["headers"], map[string]any{"X-Correlation-ID": "exec-1"}) {
		t.Errorf("js_get_msg = %#v", msg)
	}

	// Core publish reaches a subscriber.
	nc, err := natsgo.Connect(testenv.NATS(t))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	sub, err := nc.SubscribeSync("cf.core." + sfx)
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	exec(t, tool, kc, map[string]any{"operation": "publish", "subject": "cf.core." + sfx, "data": "hello"})
	m, err := sub.NextMsg(5 * time.Second)
	if err != nil || string(m.Data) != "hello" {
		t.Fatalf("subscriber got %v, %v", m, err)
	}
}

func TestErrors(t *testing.T) {
	t.Parallel()
	tool, kc, _, sfx := setup(t)
	ctx := context.Background()
	out, err := tool.Execute(ctx, &tools.Call{Config: map[string]any{"auth": "nats_e2e", "operation": "kv_get", "bucket": "cf_absent_" + sfx, "key": "k"}, Keychain: kc})
	if err != nil || out.Status != tools.StatusError {
		t.Errorf("missing bucket: %v %+v", err, out)
	}
	if _, err := tool.Execute(ctx, &tools.Call{Config: map[string]any{"auth": "nats_e2e", "operation": "frobnicate"}, Keychain: kc}); !errors.Is(err, nats.ErrBadConfig) {
		t.Errorf("unknown operation: %v", err)
	}
	if _, err := tool.Execute(ctx, &tools.Call{Config: map[string]any{"auth": "nowhere", "operation": "publish", "subject": "x"}, Keychain: kc}); !errors.Is(err, tools.ErrCredentialNotFound) {
		t.Errorf("unknown alias: %v", err)
	}
}
