package shell

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strings"
	"time"

	"github.com/cursorflow/cursorflow/tools"
	"github.com/cursorflow/cursorflow/tools/internal/conv"
	"github.com/cursorflow/cursorflow/tools/internal/proc"
)

// Defaults of Config.
const (
	// DefaultShell runs a command given as a string.
	DefaultShell = "/bin/sh"
	// DefaultMaxOutput caps the bytes kept from stdout and from stderr.
	DefaultMaxOutput = 1 << 20
)

// ErrBadConfig is wrapped by the errors Execute returns for a task
// without a command.
var ErrBadConfig = errors.New("shell: bad task configuration")

// Config configures the shell tool.
type Config struct {
	// Shell runs string commands as Shell -c command. Defaults to
	// DefaultShell.
	Shell string
	// MaxOutput caps the bytes kept from stdout and from stderr; the rest
	// is dropped. Defaults to DefaultMaxOutput.
	MaxOutput int
	// Logger is used when a Call carries no Logger. Defaults to
	// slog.Default().
	Logger *slog.Logger
}

// Tool is the shell tool. It is safe for concurrent use.
type Tool struct {
	cfg Config
	env []string
	// sweeper kills what the calls' processes left behind (proc.Start).
	sweeper proc.Sweeper
}

// New returns the shell tool.
func New(cfg Config) *Tool {
	if cfg.Shell == "" {
		cfg.Shell = DefaultShell
	}
	if cfg.MaxOutput <= 0 {
		cfg.MaxOutput = DefaultMaxOutput
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	proc.SweepOrphansOnce(cfg.Logger)
	return &Tool{cfg: cfg, env: proc.Environ()}
}

// TakesSecrets implements tools.SecretTaker: the tool runs commands with
// the worker's rights, which could read the keychain anyway, and is
// opt-in (builtin.Options.EnableShell) for that reason.
func (t *Tool) TakesSecrets() bool { return true }

// ConfigKeys implements tools.ConfigKeyLister: the keys of the package doc,
// aliases included.
func (t *Tool) ConfigKeys() []string {
	return []string{"command", "cmd", "env", "dir", "cwd", "timeout", "timeout_seconds"}
}

// ConfigSynonyms implements tools.ConfigSynonymLister.
func (t *Tool) ConfigSynonyms() [][]string {
	return [][]string{{"command", "cmd"}, {"dir", "cwd"}, proc.TimeoutKeys}
}

// Execute runs the command. A non-zero exit, a signal or a timeout is an
// error Output; Data is {stdout, stderr, exit_code} either way (exit_code
// -1 when the process did not exit normally), with stdout_truncated,
// stderr_truncated and timeout set when they apply.
func (t *Tool) Execute(ctx context.Context, call *tools.Call) (tools.Output, error) {
	var argv []string
	v, _, _ := conv.First(call.Config, "command", "cmd")
	switch v := v.(type) {
	case string:
		if strings.TrimSpace(v) != "" {
			argv = []string{t.cfg.Shell, "-c", v}
		}
	case []any:
		for _, e := range v {
			argv = append(argv, conv.Scalar(e))
		}
	case []string:
		argv = append(argv, v...)
	}
	if len(argv) == 0 || argv[0] == "" {
		return tools.Output{}, fmt.Errorf("%w: command (or cmd) is required: a string or a list", ErrBadConfig)
	}
	for _, a := range argv {
		if strings.IndexByte(a, 0) >= 0 {
			return tools.Output{}, fmt.Errorf("%w: command holds a NUL byte, which no program argument can", ErrBadConfig)
		}
	}
	start := time.Now()
	ctx, cancel, err := proc.WithTimeout(ctx, call.Config)
	if err != nil {
		return tools.Output{}, fmt.Errorf("%w: timeout: %w", ErrBadConfig, err)
	}
	defer cancel()

	cmd := proc.Command(ctx, argv[0], argv[1:]...)
	cmd.Env = t.env
	if em, ok := call.Config["env"].(map[string]any); ok {
		keys := make([]string, 0, len(em))
		for k := range em {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		env := make([]string, len(t.env), len(t.env)+len(keys))
		copy(env, t.env)
		for _, k := range keys {
			v := conv.Scalar(em[k])
			if k == "" || strings.ContainsAny(k, "=\x00") || strings.IndexByte(v, 0) >= 0 {
				return tools.Output{}, fmt.Errorf("%w: env %q: a variable's name must be non-empty without \"=\", and neither may hold a NUL byte", ErrBadConfig, k)
			}
			env = append(env, k+"="+v)
		}
		cmd.Env = env
	}
	if dir, ok := conv.String(call.Config, "dir", "cwd"); ok {
		cmd.Dir = dir
	}
	stdout := &proc.Capped{Max: t.cfg.MaxOutput}
	stderr := &proc.Capped{Max: t.cfg.MaxOutput}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	secrets := proc.Secrets(call.Revealed)
	var lines []*proc.Lines
	if call.Partial != nil {
		// Each line of output is a partial result while the command runs.
		for _, s := range []struct {
			name string
			w    *proc.Capped
			dst  *io.Writer
		}{{"stdout", stdout, &cmd.Stdout}, {"stderr", stderr, &cmd.Stderr}} {
			l := &proc.Lines{W: s.w, Revealed: call.Revealed, Line: func(line string) { call.EmitPartial(map[string]any{"stream": s.name, "line": line}) }}
			*s.dst = l
			lines = append(lines, l)
		}
	}

	if err = proc.Start(cmd, &t.sweeper); err == nil {
		err = proc.Wait(cmd)
	}
	for _, l := range lines {
		l.Flush()
	}
	code := 0
	if cmd.ProcessState != nil {
		code = cmd.ProcessState.ExitCode()
	} else if err != nil {
		code = -1
	}
	out := tools.Output{
		Status: tools.StatusSuccess,
		Data: map[string]any{"stdout": proc.CutOutput(stdout, secrets), "stderr": proc.CutOutput(stderr, secrets),
			"exit_code": code},
	}
	// A cut stream says so: a later step parsing it would otherwise take
	// its first MaxOutput bytes for the whole.
	if stdout.Dropped > 0 {
		out.Data.(map[string]any)["stdout_truncated"] = true
	}
	if stderr.Dropped > 0 {
		out.Data.(map[string]any)["stderr_truncated"] = true
	}
	if err != nil {
		out.Status = tools.StatusError
		msg := err.Error()
		if ctx.Err() != nil {
			msg = proc.Ended(ctx, start)
		}
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			// Out of time, as an http call's output says: a policy rule
			// reads it as output.error.kind timeout.
			out.Data.(map[string]any)["timeout"] = true
		}
		if s := proc.Quote(proc.CutOutput(stderr, secrets), call.Revealed, 512); s != "" {
			msg += ": " + s
		}
		out.Error = "shell: " + msg
	}
	log := call.Logger
	if log == nil {
		log = t.cfg.Logger
	}
	log.Debug("shell command", "step", call.Step, "task", call.Task, "exit_code", code)
	return out, nil
}
