package api

import (
	"context"
	"errors"
	"math"
	"sort"
	"sync"
	"time"
)

// ErrPlaybookNotFound is returned by a Store for an unknown name or
// version.
var ErrPlaybookNotFound = errors.New("api: playbook not found")

// MaxPlaybookVersion is the highest version a Store holds (PostgresStore
// keeps versions in an integer column). Get of a higher one, like that of a
// name with a control character or invalid UTF-8, is ErrPlaybookNotFound.
const MaxPlaybookVersion = math.MaxInt32

// MaxPlaybookName is the longest metadata.name, in bytes, a playbook is
// registered under: PostgresStore indexes names, and PostgreSQL's btree
// index takes at most 2704 bytes a row, so a longer name that does not
// compress could not be stored.
const MaxPlaybookName = 1024

// Playbook is one registered version of a playbook.
type Playbook struct {
	// Name is the playbook's metadata.name.
	Name string `json:"name"`
	// Version counts registrations of Name with a new source: 1, 2, ...
	Version      int       `json:"version"`
	Source       string    `json:"source,omitempty"`
	RegisteredAt time.Time `json:"registered_at"`
}

// Store keeps registered playbooks. Implementations are safe for
// concurrent use.
type Store interface {
	// Put registers source under name. When it equals the latest
	// version's source, that version is returned with created false;
	// otherwise a new version is stored.
	Put(ctx context.Context, name, source string) (pb Playbook, created bool, err error)
	// Get returns version of name, or its latest version when version is
	// 0. An unknown name or version is ErrPlaybookNotFound.
	Get(ctx context.Context, name string, version int) (Playbook, error)
	// List returns the latest version of every playbook, sorted by name,
	// without sources.
	List(ctx context.Context) ([]Playbook, error)
}

// MemoryStore is a Store in memory, for tests and single-process servers.
type MemoryStore struct {
	mu    sync.Mutex
	books map[string][]Playbook
	now   func() time.Time
}

var _ Store = (*MemoryStore)(nil)

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore() *MemoryStore {
	return &MemoryStore{books: map[string][]Playbook{}, now: time.Now}
}

// Put implements Store.
func (m *MemoryStore) Put(ctx context.Context, name, source string) (Playbook, bool, error) {
	if err := ctx.Err(); err != nil {
		return Playbook{}, false, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	vs := m.books[name]
	if n := len(vs); n > 0 && vs[n-1].Source == source {
		return vs[n-1], false, nil
	}
	pb := Playbook{Name: name, Version: len(vs) + 1, Source: source, RegisteredAt: m.now().UTC()}
	m.books[name] = append(vs, pb)
	return pb, true, nil
}

// Get implements Store.
func (m *MemoryStore) Get(ctx context.Context, name string, version int) (Playbook, error) {
	if err := ctx.Err(); err != nil {
		return Playbook{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	vs := m.books[name]
	switch {
	case len(vs) == 0 || version < 0 || version > len(vs):
		return Playbook{}, ErrPlaybookNotFound
	case version == 0:
		return vs[len(vs)-1], nil
	}
	return vs[version-1], nil
}

// List implements Store.
func (m *MemoryStore) List(ctx context.Context) ([]Playbook, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Playbook, 0, len(m.books))
	for _, vs := range m.books {
		pb := vs[len(vs)-1]
		pb.Source = ""
		out = append(out, pb)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}
