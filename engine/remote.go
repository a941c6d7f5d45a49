package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/cursorflow/cursorflow/dsl"
	"github.com/cursorflow/cursorflow/eventlog"
)

// Helpers for transports that carry commands across processes (see
// engine/natsjs).

// EncodeCommand encodes cmd for the wire. The parsed Playbook and the
// playbook source are left out: a transport ships the source once per
// PlaybookHash.
func EncodeCommand(cmd *Command) ([]byte, error) {
	if _, ok := cmd.Scope[dsl.RefsVar]; ok {
		// The resolver is the orchestrator's; the worker makes its own.
		c := *cmd
		c.Scope = make(map[string]any, len(cmd.Scope))
		for k, v := range cmd.Scope {
			if k != dsl.RefsVar {
				c.Scope[k] = v
			}
		}
		cmd = &c
	}
	b, err := json.Marshal(cmd)
	if err != nil {
		return nil, fmt.Errorf("engine: encode command %s: %w", cmd.ID, err)
	}
	return b, nil
}

// DecodeCommand decodes a command EncodeCommand produced. Whole numbers in
// the scope, args, items and rows come back as int64 (not float64), so
// templates render them exactly as the orchestrator's would. The caller
// sets Playbook (and PlaybookSource if it needs it).
func DecodeCommand(b []byte) (*Command, error) {
	var cmd Command
	if err := unmarshal(b, &cmd); err != nil {
		return nil, fmt.Errorf("engine: decode command: %w", err)
	}
	return &cmd, nil
}

// PlaybookHash returns the hex SHA-256 of a playbook source, the value of
// Command.PlaybookHash.
func PlaybookHash(src []byte) string {
	sum := sha256.Sum256(src)
	return hex.EncodeToString(sum[:])
}

// Fail reports cmd as failed with msg without running it: command.failed
// for a step or item command, frame.done with the failure for a frame. A
// transport uses it when it cannot run a command it received (playbook
// source missing, a tool panicked).
func (w *Worker) Fail(ctx context.Context, cmd *Command, rep Reporter, msg string) error {
	if cmd.Kind == KindFrame {
		return w.report(ctx, rep, cmd, eventlog.TypeFrameDone, frameDonePayload{Fail: msg})
	}
	return w.report(ctx, rep, cmd, eventlog.TypeCommandFailed, completedPayload{Error: msg})
}
