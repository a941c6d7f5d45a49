package main

import (
	"runtime"
	"testing"
)

// measure counts the collections a drain ran and the CPU the runtime
// says its collector took in them.
func TestMeasureCountsTheCollector(t *testing.T) {
	r, err := measure(config{}, func() (int64, error) {
		for range 3 {
			runtime.GC()
		}
		return 0, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if r.gcs < 3 || r.gcCPU <= 0 {
		t.Errorf("a drain that ran 3 collections: %d collections, GC CPU %v", r.gcs, r.gcCPU)
	}
	r.n = 1000
	if got, want := gcPerItem(r), float64(r.gcCPU.Microseconds())/1000; got != want {
		t.Errorf("GC per item %v, want %v", got, want)
	}
}
