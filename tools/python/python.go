package python

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/cursorflow/cursorflow/internal/jsonnum"
	"github.com/cursorflow/cursorflow/tools"
	"github.com/cursorflow/cursorflow/tools/internal/conv"
	"github.com/cursorflow/cursorflow/tools/internal/proc"
)

//go:embed driver.py
var driver string

// Defaults of Config.
const (
	// DefaultPython is the interpreter run when Config.Python is empty.
	DefaultPython = "python3"
	// DefaultMaxOutput caps the bytes of stdout and of stderr kept for the
	// log.
	DefaultMaxOutput = 1 << 20
	// DefaultMaxResult caps the bytes of the result document (the JSON the
	// code's return value encodes to), as the http tool caps a body.
	DefaultMaxResult = 64 << 20
)

// ErrBadConfig is wrapped by the errors Execute returns for a task with no
// code or an input that cannot be encoded as JSON.
var ErrBadConfig = errors.New("python: bad task configuration")

// Config configures the python tool.
type Config struct {
	// Python is the interpreter's path or name. Defaults to DefaultPython.
	Python string
	// Env is added to the child's environment, which is otherwise the
	// worker's minus every CURSORFLOW_CREDENTIAL_* variable.
	Env []string
	// Dir is the child's working directory. Defaults to the worker's.
	Dir string
	// MaxOutput caps the bytes kept from stdout and from stderr. Defaults
	// to DefaultMaxOutput.
	MaxOutput int
	// MaxResult caps the bytes of the result document; a larger result is
	// an error Output. Defaults to DefaultMaxResult.
	MaxResult int
	// Logger receives the code's stdout and stderr at debug level when a
	// Call carries no Logger. Defaults to slog.Default().
	Logger *slog.Logger
}

// Tool is the python tool. It is safe for concurrent use; each call runs
// its own interpreter process.
type Tool struct {
	cfg Config
	env []string
	// sweeper kills what the calls' processes left behind (proc.Start).
	sweeper proc.Sweeper
}

// New returns the python tool.
func New(cfg Config) *Tool {
	if cfg.Python == "" {
		cfg.Python = DefaultPython
	}
	if cfg.MaxOutput <= 0 {
		cfg.MaxOutput = DefaultMaxOutput
	}
	if cfg.MaxResult <= 0 {
		cfg.MaxResult = DefaultMaxResult
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	proc.SweepOrphansOnce(cfg.Logger)
	env := append(proc.Environ(), "PYTHONIOENCODING=utf-8", "PYTHONDONTWRITEBYTECODE=1")
	env = append(env, cfg.Env...)
	return &Tool{cfg: cfg, env: env}
}

// request is what the driver reads on stdin.
type request struct {
	Code  string            `json:"code"`
	Input map[string]any    `json:"input"`
	Libs  map[string]string `json:"libs,omitempty"`
}

// reply is what the driver writes on file descriptor 3.
type reply struct {
	OK        bool            `json:"ok"`
	Result    json.RawMessage `json:"result"`
	Type      string          `json:"type"`
	Error     string          `json:"error"`
	Traceback string          `json:"traceback"`
}

// Input returns the input_data a call hands to the code: the step's Args,
// overlaid with the task's args, then input, then input_data maps.
func Input(call *tools.Call) map[string]any {
	in := make(map[string]any, len(call.Args))
	for k, v := range call.Args {
		in[k] = v
	}
	for _, key := range []string{"args", "input", "input_data"} {
		if m, ok := call.Config[key].(map[string]any); ok {
			for k, v := range m {
				in[k] = v
			}
		}
	}
	return in
}

// TakesSecrets implements tools.SecretTaker: the tool runs code with the
// worker's rights, which could read the keychain anyway, and is opt-in
// (builtin.Options.EnablePython) for that reason.
func (t *Tool) TakesSecrets() bool { return true }

// ConfigKeys implements tools.ConfigKeyLister: the keys of the package doc,
// aliases included.
func (t *Tool) ConfigKeys() []string {
	return []string{"code", "input", "args", "input_data", "libs", "timeout", "timeout_seconds"}
}

// ConfigSynonyms implements tools.ConfigSynonymLister (input, args and
// input_data are merged, not synonyms).
func (t *Tool) ConfigSynonyms() [][]string {
	return [][]string{proc.TimeoutKeys}
}

// Execute runs the task's code in a fresh interpreter. An exception, a
// non-zero exit or a timeout is an error Output (a timeout's Data is
// {"timeout": true}, which a policy rule reads as output.error.kind
// "timeout"); only a task without code or with unencodable input is a
// returned error.
func (t *Tool) Execute(ctx context.Context, call *tools.Call) (tools.Output, error) {
	code, ok := conv.String(call.Config, "code")
	if !ok || strings.TrimSpace(code) == "" {
		return tools.Output{}, fmt.Errorf("%w: code is required", ErrBadConfig)
	}
	req := request{Code: code, Input: Input(call)}
	if libs, ok := call.Config["libs"].(map[string]any); ok {
		req.Libs = make(map[string]string, len(libs))
		for alias, mod := range libs {
			req.Libs[alias] = conv.Scalar(mod)
		}
	}
	stdin, err := json.Marshal(req)
	if err != nil {
		return tools.Output{}, fmt.Errorf("%w: input is not JSON-encodable: %w", ErrBadConfig, err)
	}
	start := time.Now()
	ctx, cancel, err := proc.WithTimeout(ctx, call.Config)
	if err != nil {
		return tools.Output{}, fmt.Errorf("%w: timeout: %w", ErrBadConfig, err)
	}
	defer cancel()

	resR, resW, err := os.Pipe()
	if err != nil {
		return tools.Output{}, fmt.Errorf("python: result pipe: %w", err)
	}
	defer resR.Close()

	cmd := proc.Command(ctx, t.cfg.Python, "-c", driver)
	cmd.Env = t.env
	cmd.Dir = t.cfg.Dir
	cmd.Stdin = bytes.NewReader(stdin)
	stdout := &proc.Capped{Max: t.cfg.MaxOutput}
	stderr := &proc.Capped{Max: t.cfg.MaxOutput}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.ExtraFiles = []*os.File{resW} // fd 3 in the child

	if err := proc.Start(cmd, &t.sweeper); err != nil {
		resW.Close()
		return tools.Output{Status: tools.StatusError, Error: fmt.Sprintf("python: start %s: %v", t.cfg.Python, err)}, nil
	}
	resW.Close()
	// Read the result concurrently, to its end: a child blocked writing
	// into a full pipe never exits, so bytes past the cap are read and
	// dropped rather than left unread.
	resCh := make(chan []byte, 1)
	go func() {
		res := &proc.Capped{Max: t.cfg.MaxResult + 1}
		_, _ = io.Copy(res, resR)
		resCh <- res.Bytes()
	}()
	waitErr := proc.Wait(cmd)
	// The interpreter has exited, and with it its end of the result pipe;
	// a process its code started may hold it still (os.system("... &")
	// hands file descriptor 3 on). The pipe is waited for as long as exec
	// waits for stdout, and then that process is killed, as proc.Wait
	// kills one holding stdout: the call neither outlives its timeout nor
	// leaves it running.
	var raw []byte
	held := time.NewTimer(proc.WaitDelay)
	select {
	case raw = <-resCh:
	case <-held.C:
		if cmd.Cancel != nil {
			_ = cmd.Cancel()
		}
		_ = resR.Close() // the holder may have escaped the kill: stop reading
		raw = <-resCh
		if waitErr == nil {
			waitErr = fmt.Errorf("the interpreter exited, but a process its code started still held the result pipe %s later (killed)", proc.WaitDelay)
		}
	}
	held.Stop()

	log := call.Logger
	if log == nil {
		log = t.cfg.Logger
	}
	// The log gets the output with the revealed secrets concealed, as
	// the worker records the result.
	secrets := proc.Secrets(call.Revealed)
	if stdout.Len() > 0 && log.Enabled(ctx, slog.LevelDebug) {
		log.Debug("python stdout", "step", call.Step, "task", call.Task, "output", proc.Quote(proc.CutOutput(stdout, secrets), call.Revealed, t.cfg.MaxOutput))
	}
	if stderr.Len() > 0 && log.Enabled(ctx, slog.LevelDebug) {
		log.Debug("python stderr", "step", call.Step, "task", call.Task, "output", proc.Quote(proc.CutOutput(stderr, secrets), call.Revealed, t.cfg.MaxOutput))
	}

	if ctxErr := ctx.Err(); ctxErr != nil {
		out := tools.Output{Status: tools.StatusError, Error: "python: " + proc.Ended(ctx, start)}
		if errors.Is(ctxErr, context.DeadlineExceeded) {
			// Out of time, as an http call's output says: a policy rule
			// reads it as output.error.kind timeout.
			out.Data = map[string]any{"timeout": true}
		}
		return out, nil
	}
	if len(raw) > t.cfg.MaxResult {
		return tools.Output{Status: tools.StatusError, Error: fmt.Sprintf("python: result larger than %d bytes (Config.MaxResult)", t.cfg.MaxResult)}, nil
	}
	var rep reply
	if len(raw) == 0 || json.Unmarshal(raw, &rep) != nil {
		msg := "python: interpreter exited without a result"
		if waitErr != nil {
			msg = "python: " + waitErr.Error()
		}
		if s := proc.Quote(proc.CutOutput(stderr, secrets), call.Revealed, 2048); s != "" {
			msg += ": " + s
		}
		return tools.Output{Status: tools.StatusError, Error: msg}, nil
	}
	if !rep.OK {
		msg := rep.Type
		if rep.Error != "" {
			msg += ": " + rep.Error
		}
		if rep.Traceback != "" {
			msg += "\n" + rep.Traceback
		}
		return tools.Output{
			Status: tools.StatusError,
			Error:  msg,
			Data:   map[string]any{"exception": rep.Type, "message": rep.Error, "traceback": rep.Traceback},
		}, nil
	}
	if waitErr != nil {
		return tools.Output{Status: tools.StatusError, Error: "python: " + waitErr.Error()}, nil
	}
	result, err := jsonnum.Decode(rep.Result)
	if err != nil {
		return tools.Output{Status: tools.StatusError, Error: "python: unreadable result: " + err.Error()}, nil
	}
	return tools.Output{Status: tools.StatusSuccess, Data: result}, nil
}
