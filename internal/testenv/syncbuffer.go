package testenv

import (
	"bytes"
	"sync"
)

// SyncBuffer is a bytes.Buffer that a logger's (or a callback's)
// goroutines and the test may write and read at once. The zero value is
// ready.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write implements io.Writer.
func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what was written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
