package main

// Live progress of a run on a terminal: one line for the execution and
// one per running loop (rows or items done, failed, dead, rate, frames in
// flight, elapsed), redrawn in place. Nothing is drawn when the output is
// not a terminal, with --json, or with --progress never.

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/term"

	"github.com/cursorflow/cursorflow/engine"
)

// progressEvery is how often the progress is redrawn.
const progressEvery = 500 * time.Millisecond

// Values of --progress.
const (
	progressAuto   = "auto"   // on a terminal only
	progressAlways = "always" // even when the output is not a terminal
	progressNever  = "never"
)

// validProgress reports whether mode is a value of --progress.
func validProgress(mode string) bool {
	return mode == progressAuto || mode == progressAlways || mode == progressNever
}

// wantProgress decides whether to draw progress on w.
func wantProgress(mode string, jsonOut bool, w io.Writer) bool {
	switch {
	case jsonOut || mode == progressNever:
		return false
	case mode == progressAlways:
		return true
	}
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// terminalWidth returns w's width in columns, or 0 when it has none.
func terminalWidth(w io.Writer) int {
	if f, ok := w.(*os.File); ok {
		if cols, _, err := term.GetSize(int(f.Fd())); err == nil {
			return cols
		}
	}
	return 0
}

// progress draws an execution's status in place.
type progress struct {
	w     io.Writer
	width int // columns; 0: do not truncate
	now   func() time.Time
	drawn int // lines drawn last, erased before the next draw
}

// render returns the lines describing st.
func (p *progress) render(st *engine.Status) []string {
	head := fmt.Sprintf("%s %s · %s · %s events", orDash(st.Playbook), st.Status, p.elapsed(st.StartedAt, st.EndedAt), grouped(st.Events))
	if n := len(st.InFlight); n > 0 {
		head += fmt.Sprintf(" · %d in flight", n)
	}
	lines := []string{head}
	ids := make([]string, 0, len(st.Loops))
	for id, l := range st.Loops {
		if !l.Finished {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	for _, id := range ids {
		l := st.Loops[id]
		if l.Mode == "cursor" {
			line := fmt.Sprintf("  %s  rows %s done · %s failed · %s dead · %s rows/s · %d frames in flight · %s",
				id, grouped(int64(l.OK)), grouped(int64(l.Failed)), grouped(int64(l.Dead)), rate(l.Rate), l.InFlight, p.elapsed(l.StartedAt, time.Time{}))
			// After a lost frame attempt (a killed run resumed, a worker
			// gone) the loop does not end before the source has taken
			// back what that attempt may hold: say so, or a drained loop
			// that waits looks hung.
			if wait := l.HoldUntil.Sub(p.now()); wait > 0 {
				line += fmt.Sprintf(" · held %s more for rows a lost claim may hold", wait.Round(time.Second))
			}
			lines = append(lines, line)
			continue
		}
		lines = append(lines, fmt.Sprintf("  %s  %s %s/%s items · %s items/s · %d in flight · %s",
			id, bar(l.Done, l.Items, 20), grouped(int64(l.Done)), grouped(int64(l.Items)), rate(l.Rate), l.InFlight, p.elapsed(l.StartedAt, time.Time{})))
	}
	var running []string
	for name, status := range st.Steps {
		if status == engine.StatusRunning && !loopOfStep(st, name) {
			running = append(running, name)
		}
	}
	if len(running) > 0 {
		sort.Strings(running)
		lines = append(lines, "  running: "+strings.Join(running, ", "))
	}
	return lines
}

func loopOfStep(st *engine.Status, step string) bool {
	for _, l := range st.Loops {
		if l.Step == step && !l.Finished {
			return true
		}
	}
	return false
}

// draw replaces the previous drawing with st's.
func (p *progress) draw(st *engine.Status) {
	var b strings.Builder
	p.erase(&b)
	lines := p.render(st)
	for _, l := range lines {
		l = printable(l) // a line of one line, whatever its step names hold
		if p.width > 1 && len([]rune(l)) >= p.width {
			l = string([]rune(l)[:p.width-2]) + "…"
		}
		b.WriteString(l)
		b.WriteString("\n")
	}
	p.drawn = len(lines)
	_, _ = io.WriteString(p.w, b.String())
}

// clear erases the drawing.
func (p *progress) clear() {
	var b strings.Builder
	p.erase(&b)
	p.drawn = 0
	_, _ = io.WriteString(p.w, b.String())
}

// erase moves up over the lines drawn last and clears to the end of the
// screen.
func (p *progress) erase(b *strings.Builder) {
	if p.drawn > 0 {
		fmt.Fprintf(b, "\x1b[%dA\x1b[J", p.drawn)
	}
}

func (p *progress) elapsed(from, to time.Time) string {
	if from.IsZero() {
		return "0s"
	}
	if to.IsZero() {
		to = p.now()
	}
	d := to.Sub(from)
	if d < 0 {
		d = 0
	}
	if d < time.Minute {
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// watchProgress draws the status that status returns every progressEvery
// until the returned stop is called; stop erases the drawing. Errors
// reading the status skip a redraw.
func watchProgress(ctx context.Context, w io.Writer, status func(context.Context) (*engine.Status, error)) (stop func()) {
	p := &progress{w: w, width: terminalWidth(w), now: time.Now}
	end := pollStatus(ctx, progressEvery, status, p.draw)
	return func() {
		end()
		p.clear()
	}
}

// pollStatus hands the status that status returns to on at once and then
// every interval, until the returned stop is called (which waits for a
// call in progress); errors reading the status skip a call.
func pollStatus(ctx context.Context, every time.Duration, status func(context.Context) (*engine.Status, error), on func(*engine.Status)) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			if st, err := status(ctx); err == nil {
				on(st)
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	})
	return func() {
		cancel()
		wg.Wait()
	}
}

// grouped formats n with thousands separators: 1,234,567.
func grouped(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

func rate(r float64) string {
	if r >= 100 {
		return grouped(int64(r + 0.5))
	}
	return strconv.FormatFloat(r, 'f', 1, 64)
}

// bar draws done out of total as [#####-----] in width cells.
func bar(done, total, width int) string {
	if total <= 0 {
		return "[" + strings.Repeat("-", width) + "]"
	}
	n := min(width, done*width/total)
	return "[" + strings.Repeat("#", n) + strings.Repeat("-", width-n) + "]"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// holdEvery is how often a run without a progress drawing looks for loops
// held after a lost frame attempt (watchHolds).
const holdEvery = 2 * time.Second

// holdNotices returns a line for each running cursor loop of st whose drain
// is held past now (engine.LoopStatus.HoldUntil) until a time not said yet,
// and notes it in said.
func holdNotices(st *engine.Status, said map[string]time.Time, now time.Time) []string {
	var out []string
	for _, id := range slices.Sorted(maps.Keys(st.Loops)) {
		l := st.Loops[id]
		if l.Finished || !l.HoldUntil.After(now) || said[id].Equal(l.HoldUntil) {
			continue
		}
		said[id] = l.HoldUntil
		out = append(out, printable(fmt.Sprintf("cursorflow: loop %s lost a frame attempt: it does not end before %s (in %s), when the source has taken back the rows that attempt may hold",
			id, l.HoldUntil.Local().Format(time.TimeOnly), l.HoldUntil.Sub(now).Round(time.Second))))
	}
	return out
}

// watchHolds prints holdNotices on w every holdEvery until the returned
// stop is called: without a progress drawing, a drain that waits out a
// lost attempt's hold would otherwise sit silent for up to a frame lease.
func watchHolds(ctx context.Context, w io.Writer, status func(context.Context) (*engine.Status, error)) (stop func()) {
	said := map[string]time.Time{}
	return pollStatus(ctx, holdEvery, status, func(st *engine.Status) {
		for _, line := range holdNotices(st, said, time.Now()) {
			fmt.Fprintln(w, line)
		}
	})
}
