package main

import "slices"

// schedule is the order of one run's drains (run counts from 0 to
// runs-1). The speed of this machine drifts from minute to minute, so an
// engine mode is compared with its base measured right beside it, not
// once somewhere else in the run: each base runs before its first engine
// mode, between every two, and after the last (baseline-frame,
// frame/sqlite, baseline-frame, frame/postgres, baseline-frame), and a
// nats-frame/LOG runs right beside its frame/LOG. From run to run the
// families (and river) rotate, and so do the engine modes within a
// family, with nats-frame/LOG after its frame/LOG in one run and before
// it in the next.
func schedule(modes []mode, run, runs int) []mode {
	byName := map[string]mode{}
	for _, m := range modes {
		byName[m.name] = m
	}
	// beside[f] are the modes whose base is the engine mode f (nats-frame).
	beside := map[string][]mode{}
	for _, m := range modes {
		if b, ok := byName[m.base]; ok && b.engine() {
			beside[b.name] = append(beside[b.name], m)
		}
	}
	placed := map[string]bool{}
	var units [][]mode
	for _, base := range modes {
		if base.engine() || base.kind == "river" {
			continue
		}
		var engines [][]mode
		for _, m := range modes {
			if m.base != base.name {
				continue
			}
			pair := append([]mode{m}, beside[m.name]...)
			if run%2 == 1 {
				slices.Reverse(pair)
			}
			engines = append(engines, pair)
		}
		unit := []mode{base}
		for _, e := range rotate(engines, run, runs) {
			unit = append(unit, e...)
			unit = append(unit, base)
		}
		for _, m := range unit {
			placed[m.name] = true
		}
		units = append(units, unit)
	}
	// The rest: river, and engine modes whose base is not run.
	for _, m := range modes {
		if !placed[m.name] {
			placed[m.name] = true
			unit := append([]mode{m}, beside[m.name]...)
			for _, b := range beside[m.name] {
				placed[b.name] = true
			}
			units = append(units, unit)
		}
	}
	var order []mode
	for _, u := range rotate(units, run, runs) {
		order = append(order, u...)
	}
	return order
}

// rotate returns xs rotated by run's share of runs, so that over the runs
// each element meets the machine at a different point of the run.
func rotate[T any](xs []T, run, runs int) []T {
	off := run * len(xs) / max(runs, 1) % max(len(xs), 1)
	return append(slices.Clone(xs[off:]), xs[:off]...)
}

// baseRate is the rate r is compared with: the mean of its base's drains
// just before and just after it in the same run, or of the one there is.
func baseRate(bases []result, r result) (float64, bool) {
	var before, after *result
	for i := range bases {
		b := &bases[i]
		if b.run != r.run {
			continue
		}
		if b.pos < r.pos && (before == nil || b.pos > before.pos) {
			before = b
		}
		if b.pos > r.pos && (after == nil || b.pos < after.pos) {
			after = b
		}
	}
	switch {
	case before != nil && after != nil:
		return (before.rate() + after.rate()) / 2, true
	case before != nil:
		return before.rate(), true
	case after != nil:
		return after.rate(), true
	}
	return 0, false
}

// sameRun returns the drain of rs that belongs to run.
func sameRun(rs []result, run int) (result, bool) {
	for _, r := range rs {
		if r.run == run {
			return r, true
		}
	}
	return result{}, false
}
