// Package pgcpu reads how much CPU time a PostgreSQL server running on
// this machine has used, from /proc: its postmaster and every process the
// postmaster forked, running or already reaped. Benchmarks use it to
// report a statement's cost on the server next to its cost in the
// client, which on a small machine is what a drain's rate follows.
//
// It works where the server is a process this one can see (same host and
// pid namespace, Linux); elsewhere Of returns a Server that measures
// nothing.
package pgcpu

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// clockTicks is USER_HZ, the unit of /proc's CPU times: 100 on Linux.
const clockTicks = 100

// Server is a PostgreSQL server's CPU meter. The zero value measures
// nothing.
type Server struct{ postmaster int }

// find returns the server of the backend whose pid the server reported
// (pg_backend_pid), if that backend is a postgres process on this
// machine, as seen in this process's /proc; otherwise the zero Server.
func find(backendPID int) Server {
	st, ok := procStat(backendPID)
	if !ok || st.comm != "postgres" {
		return Server{}
	}
	if pm, ok := procStat(st.ppid); !ok || pm.comm != "postgres" {
		return Server{}
	}
	return Server{postmaster: st.ppid}
}

// Of returns the server pool connects to, found from one of its backends.
func Of(ctx context.Context, pool *pgxpool.Pool) (Server, error) {
	var pid int
	if err := pool.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		return Server{}, fmt.Errorf("pgcpu: backend pid: %w", err)
	}
	return find(pid), nil
}

// Postmaster returns the postmaster's pid, 0 for the zero Server.
func (s Server) Postmaster() int { return s.postmaster }

// CPU returns the server's CPU time so far: the postmaster's own, that of
// its reaped children, and that of its live ones; false when s measures
// nothing. A child reaped between the postmaster's figures and the walk
// over its children would be in neither (a run ending as its pools close
// lost a backend's whole CPU that way), so the walk is taken again until
// the postmaster's reaped total held still around it.
func (s Server) CPU() (time.Duration, bool) {
	if s.postmaster == 0 {
		return 0, false
	}
	for range 10 {
		before, ok := procStat(s.postmaster)
		if !ok {
			return 0, false
		}
		children, ok := s.childTicks()
		if !ok {
			return 0, false
		}
		after, ok := procStat(s.postmaster)
		if !ok {
			return 0, false
		}
		if after.cutime != before.cutime || after.cstime != before.cstime {
			continue // a child was reaped meanwhile
		}
		ticks := after.utime + after.stime + after.cutime + after.cstime + children
		return time.Duration(ticks) * time.Second / clockTicks, true
	}
	return 0, false
}

// Backend returns the CPU time so far of the server's backend pid (as
// pg_backend_pid reports it); false when it is no postgres process on this
// machine. It measures one session's statements alone, without what the
// server's other sessions and its background processes did meanwhile.
func Backend(pid int) (time.Duration, bool) {
	st, ok := procStat(pid)
	if !ok || st.comm != "postgres" {
		return 0, false
	}
	return time.Duration(st.utime+st.stime) * time.Second / clockTicks, true
}

// childTicks sums the CPU ticks of the postmaster's live children.
func (s Server) childTicks() (int64, bool) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, false
	}
	var ticks int64
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, ok := procStat(pid); ok && st.ppid == s.postmaster {
			ticks += st.utime + st.stime
		}
	}
	return ticks, true
}

// stat is what this package reads of /proc/<pid>/stat.
type stat struct {
	comm                         string
	ppid                         int
	utime, stime, cutime, cstime int64
}

func procStat(pid int) (stat, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return stat{}, false
	}
	// pid (comm) state ppid ...: comm may hold spaces and parentheses, so
	// the fields are counted from its last ')'.
	open, end := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if open < 0 || end < open {
		return stat{}, false
	}
	f := strings.Fields(string(b[end+1:]))
	if len(f) < 15 {
		return stat{}, false
	}
	var st stat
	st.comm = string(b[open+1 : end])
	st.ppid, _ = strconv.Atoi(f[1])
	nums := []*int64{&st.utime, &st.stime, &st.cutime, &st.cstime}
	for i, p := range nums {
		v, err := strconv.ParseInt(f[11+i], 10, 64)
		if err != nil {
			return stat{}, false
		}
		*p = v
	}
	return st, true
}
