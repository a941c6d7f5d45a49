package natsjs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Defaults of Config and WorkerOptions.
const (
	// DefaultPrefix names the subjects, streams and bucket.
	DefaultPrefix = "cursorflow"
	// DefaultPool is the pool of a command whose step names none.
	DefaultPool = "default"
	// DefaultAckWait is the transport lease of a command message.
	DefaultAckWait = 30 * time.Second
	// DefaultEventAckWait is the redelivery delay of an unrecorded report.
	DefaultEventAckWait = 10 * time.Second
	// DefaultReportTimeout bounds a worker's wait for the verdict on a
	// frame.claimed report.
	DefaultReportTimeout = 2 * time.Minute
	// DefaultEventConcurrency bounds the reports the orchestrator side
	// records at once.
	DefaultEventConcurrency = 512
	// DefaultConcurrency is a worker's number of commands run at once.
	DefaultConcurrency = 8
	// DefaultGrace is how long a stopping worker lets running commands
	// finish.
	DefaultGrace = 30 * time.Second
	// DefaultCheckTimeout bounds a worker's staleness check of a
	// redelivered command.
	DefaultCheckTimeout = 2 * time.Second
)

// ErrConfig reports an invalid configuration; the message names the field.
var ErrConfig = errors.New("natsjs: invalid configuration")

var namePattern = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// Config names the JetStream resources both sides share and tunes them.
// Orchestrator and workers must use the same Prefix.
type Config struct {
	// Conn is the NATS connection. Required. The caller closes it.
	Conn *nats.Conn
	// Prefix names everything this transport creates: subjects
	// <prefix>.cmd.<pool>, <prefix>.cmd.<pool>.<worker id> (commands
	// for one worker), <prefix>.evt, <prefix>.hb, <prefix>.check,
	// <prefix>.chain (chained frame reports, request and reply),
	// <prefix>.cancel and <prefix>.workers (capacity reports),
	// streams <PREFIX>_COMMANDS and <PREFIX>_EVENTS and the key-value
	// bucket <PREFIX>_PLAYBOOKS. Letters, digits, '-' and '_' only.
	// Defaults to DefaultPrefix ("cursorflow"); tests use a unique one.
	Prefix string
	// AckWait is the transport lease of a command message: a worker
	// signals progress (InProgress) every AckWait/3 while the command runs;
	// a message that goes AckWait without it is redelivered. Defaults to
	// DefaultAckWait (30s).
	AckWait time.Duration
	// EventAckWait is how long the orchestrator side may take to record
	// a report before the events stream delivers it again (to it or, after
	// a failover, to the new leader). Redelivery is harmless (the engine's
	// fencing refuses a report twice recorded), so keep it short enough
	// that a dead leader's unacknowledged reports come back quickly.
	// Defaults to DefaultEventAckWait (10s).
	EventAckWait time.Duration
	// ReportTimeout bounds how long a worker waits for the orchestrator's
	// verdict on a frame.claimed report (the rows must be on record
	// before the frame's body runs). Defaults to DefaultReportTimeout (2m).
	ReportTimeout time.Duration
	// Replicas is the replica count of the streams and the bucket.
	// Defaults to 1.
	Replicas int
	// Logger receives the transport's logs. Defaults to slog.Default().
	Logger *slog.Logger
}

func (c Config) withDefaults() (Config, error) {
	if c.Conn == nil {
		return c, fmt.Errorf("%w: Config.Conn is required", ErrConfig)
	}
	if c.Prefix == "" {
		c.Prefix = DefaultPrefix
	}
	if !namePattern.MatchString(c.Prefix) {
		return c, fmt.Errorf("%w: Config.Prefix %q: letters, digits, '-' and '_' only", ErrConfig, c.Prefix)
	}
	if c.AckWait < 0 || c.EventAckWait < 0 || c.ReportTimeout < 0 || c.Replicas < 0 {
		return c, fmt.Errorf("%w: Config.AckWait, EventAckWait, ReportTimeout and Replicas must not be negative", ErrConfig)
	}
	if c.EventAckWait == 0 {
		c.EventAckWait = DefaultEventAckWait
	}
	if c.AckWait == 0 {
		c.AckWait = DefaultAckWait
	}
	if c.ReportTimeout == 0 {
		c.ReportTimeout = DefaultReportTimeout
	}
	if c.Replicas == 0 {
		c.Replicas = 1
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c, nil
}

// names are the subjects and resources of one prefix.
type names struct {
	cmdStream, evtStream, bucket      string
	cmdPrefix, evt, hb, check, cancel string
	// chain carries chained frame reports (request and reply, no stream).
	chain string
	// workers carries capacity reports; workersPing asks for one.
	workers, workersPing string
}

func namesOf(prefix string) names {
	up := strings.ToUpper(prefix)
	return names{
		cmdStream: up + "_COMMANDS", evtStream: up + "_EVENTS", bucket: up + "_PLAYBOOKS",
		cmdPrefix: prefix + ".cmd.", evt: prefix + ".evt", hb: prefix + ".hb", check: prefix + ".check", cancel: prefix + ".cancel",
		chain: prefix + ".chain", workers: prefix + ".workers", workersPing: prefix + ".workers.ping",
	}
}

// poolOf returns the pool a command goes to.
func poolOf(pool string) string {
	if pool == "" {
		return DefaultPool
	}
	return pool
}

// ValidPool reports whether name can name a worker pool (it becomes a
// subject token and part of a consumer name).
func ValidPool(name string) bool { return namePattern.MatchString(name) }

// setup creates or updates the streams and the bucket.
func setup(ctx context.Context, cfg Config) (jetstream.JetStream, jetstream.KeyValue, names, error) {
	n := namesOf(cfg.Prefix)
	js, err := jetstream.New(cfg.Conn, jetstream.WithPublishAsyncMaxPending(4096))
	if err != nil {
		return nil, nil, n, fmt.Errorf("natsjs: jetstream: %w", err)
	}
	kv, err := ensure(ctx, js, cfg, n)
	if err != nil {
		return nil, nil, n, err
	}
	return js, kv, n, nil
}

// ensure creates the streams and the bucket, or updates them. Both sides
// call it again when they find them gone: an operator deleted them, or the
// NATS server came back without its store.
func ensure(ctx context.Context, js jetstream.JetStream, cfg Config, n names) (jetstream.KeyValue, error) {
	// Work-queue retention: a message is gone once acknowledged; each pool
	// has one consumer, so subjects never overlap.
	_, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name: n.cmdStream, Subjects: []string{n.cmdPrefix + ">"}, Retention: jetstream.WorkQueuePolicy,
		Storage: jetstream.FileStorage, Replicas: cfg.Replicas, Duplicates: 2 * time.Minute,
	})
	if err != nil {
		return nil, fmt.Errorf("natsjs: stream %s: %w", n.cmdStream, err)
	}
	_, err = js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name: n.evtStream, Subjects: []string{n.evt}, Retention: jetstream.WorkQueuePolicy,
		Storage: jetstream.FileStorage, Replicas: cfg.Replicas, Duplicates: 2 * time.Minute,
	})
	if err != nil {
		return nil, fmt.Errorf("natsjs: stream %s: %w", n.evtStream, err)
	}
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket: n.bucket, Description: "cursorflow playbook sources by SHA-256", Storage: jetstream.FileStorage, Replicas: cfg.Replicas,
	})
	if err != nil {
		return nil, fmt.Errorf("natsjs: bucket %s: %w", n.bucket, err)
	}
	return kv, nil
}

// gone reports whether err says a stream or consumer does not exist (any
// more): deleted, or lost with the server's store.
func gone(err error) bool {
	return errors.Is(err, jetstream.ErrStreamNotFound) || errors.Is(err, jetstream.ErrConsumerNotFound) ||
		errors.Is(err, jetstream.ErrConsumerDeleted) || errors.Is(err, jetstream.ErrNoStreamResponse) ||
		errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrBucketNotFound)
}

// Delete removes the streams and the bucket of cfg.Prefix (tests clean up
// with it). Commands and events still in them are lost.
func Delete(ctx context.Context, cfg Config) error {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return err
	}
	n := namesOf(cfg.Prefix)
	js, err := jetstream.New(cfg.Conn)
	if err != nil {
		return err
	}
	var errs []error
	for _, s := range []string{n.cmdStream, n.evtStream} {
		if err := js.DeleteStream(ctx, s); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
			errs = append(errs, err)
		}
	}
	if err := js.DeleteKeyValue(ctx, n.bucket); err != nil && !errors.Is(err, jetstream.ErrBucketNotFound) && !errors.Is(err, jetstream.ErrStreamNotFound) {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// wire messages besides commands and events.
type heartbeatMsg struct {
	ExecutionID string `json:"e"`
	CommandID   string `json:"c"`
}

// Verdicts the orchestrator side sends back. A chained report's verdict
// is one of these or the encoded command of the slot's next frame.
const (
	verdictOK    = "ok"
	verdictStale = "stale"
	// verdictRetry: a chained report was not recorded; the worker sends
	// it again until ReportTimeout, then reports the frame.done alone.
	verdictRetry = "retry"
	// check answers
	checkRun       = "run"
	checkClaimed   = "claimed"
	checkUnknown   = "unknown"
	checkCancelled = "cancelled"
)

// headerReply carries the subject a report's verdict goes to.
const headerReply = "Cf-Reply"
