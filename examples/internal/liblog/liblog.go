// Package liblog routes the lines that go-redis and go-sql-driver/mysql
// log themselves (a pool failing to dial, a connection dropped mid-packet)
// through a program's slog logger, at debug level, instead of the
// standard library's log package on stderr: they then honour the
// program's handler and its -v, like every other line. Both libraries'
// loggers are package-level, so a program sets them once, from main; a
// library must not.
//
// The engine reports the failures behind these lines itself (a warning
// per transient failure it retries, the loop's error when it gives up):
// the libraries' lines are detail, for debugging.
package liblog

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"
)

var current atomic.Pointer[slog.Logger]

// Install sets go-redis's and go-sql-driver/mysql's loggers to ones that
// log, at debug level, to the logger last given to Use (slog.Default()
// until then). Call it once, from main, before any client is made:
// mysql copies its logger into each connection's configuration.
func Install() {
	redis.SetLogger(redisLogger{})
	_ = mysql.SetLogger(mysqlLogger{})
}

// Use makes logger receive the libraries' lines from now on. A nil logger
// means slog.Default().
func Use(logger *slog.Logger) { current.Store(logger) }

func logger() *slog.Logger {
	if l := current.Load(); l != nil {
		return l
	}
	return slog.Default()
}

type redisLogger struct{}

// Printf logs one of go-redis's lines, without its "redis: " prefix.
func (redisLogger) Printf(ctx context.Context, format string, v ...any) {
	msg := strings.TrimPrefix(fmt.Sprintf(format, v...), "redis: ")
	logger().DebugContext(ctx, "redis: "+msg, "lib", "go-redis")
}

type mysqlLogger struct{}

// Print logs one of go-sql-driver/mysql's lines.
func (mysqlLogger) Print(v ...any) {
	logger().Debug("mysql: "+strings.TrimSpace(fmt.Sprint(v...)), "lib", "go-sql-driver/mysql")
}
