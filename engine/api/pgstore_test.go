package api_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cursorflow/cursorflow/engine/api"
	"github.com/cursorflow/cursorflow/internal/testenv"
)

// storeContract runs the Store behaviour every implementation shares.
func storeContract(t *testing.T, st api.Store) {
	ctx := context.Background()
	if _, err := st.Get(ctx, "a", 0); err != api.ErrPlaybookNotFound {
		t.Fatalf("Get of an empty store: %v", err)
	}
	pb, isNew, err := st.Put(ctx, "a", "one")
	if err != nil || !isNew || pb.Version != 1 || pb.RegisteredAt.IsZero() {
		t.Fatalf("Put: %+v %v %v", pb, isNew, err)
	}
	pb, isNew, err = st.Put(ctx, "a", "one")
	if err != nil || isNew || pb.Version != 1 {
		t.Fatalf("Put of the same source: %+v %v %v", pb, isNew, err)
	}
	var created int
	// Concurrent registrations of new sources all get distinct versions.
	var wg sync.WaitGroup
	versions := make([]int, 8)
	for i := range versions {
		wg.Go(func() {
			pb, _, err := st.Put(ctx, "a", fmt.Sprint("src", i))
			if err != nil {
				t.Error(err)
				return
			}
			versions[i] = pb.Version
		})
	}
	wg.Wait()
	seen := map[int]bool{}
	for _, v := range versions {
		if v < 2 || v > 9 || seen[v] {
			t.Fatalf("versions %v: want 2..9 once each", versions)
		}
		seen[v] = true
	}
	if _, _, err := st.Put(ctx, "b", "bee"); err != nil {
		t.Fatal(err)
	}
	got, err := st.Get(ctx, "a", 1)
	if err != nil || got.Source != "one" {
		t.Fatalf("Get v1: %+v %v", got, err)
	}
	got, err = st.Get(ctx, "a", 0)
	if err != nil || got.Version != 9 {
		t.Fatalf("Get latest: %+v %v", got, err)
	}
	if _, err := st.Get(ctx, "a", 10); err != api.ErrPlaybookNotFound {
		t.Fatalf("Get v10: %v", err)
	}
	list, err := st.List(ctx)
	if err != nil || len(list) != 2 || list[0].Name != "a" || list[0].Version != 9 || list[1].Name != "b" || list[0].Source != "" {
		t.Fatalf("List: %+v %v", list, err)
	}
	// Concurrent registrations of one source (a deploy that registers
	// its playbooks on every replica at once) store it once: the others
	// get that version, not created.
	var mu sync.Mutex
	created, versions = 0, nil
	start := make(chan struct{})
	for range 16 {
		wg.Go(func() {
			<-start
			pb, c, err := st.Put(ctx, "c", "same")
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			versions = append(versions, pb.Version)
			if c {
				created++
			}
		})
	}
	close(start)
	wg.Wait()
	if created != 1 || slices.Max(versions) != 1 {
		t.Fatalf("16 registrations of one source: %d created, versions %v; want 1 created, all version 1", created, versions)
	}
}

func TestMemoryStore(t *testing.T) {
	t.Parallel()
	storeContract(t, api.NewMemoryStore())
}

// storeSchema returns a pool and a fresh schema name, dropped after the
// test.
func storeSchema(t *testing.T) (*pgxpool.Pool, string) {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), testenv.Postgres(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	schema := fmt.Sprintf("api_store_%d", rand.Uint32())
	t.Cleanup(func() {
		_, _ = pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
	})
	return pool, schema
}

func TestPostgresStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, schema := storeSchema(t)
	st, err := api.NewPostgresStore(ctx, pool, schema)
	if err != nil {
		t.Fatal(err)
	}
	// Opening again (a second replica) finds the table in place.
	if _, err := api.NewPostgresStore(ctx, pool, schema); err != nil {
		t.Fatal(err)
	}
	storeContract(t, st)
}

// Replicas starting together on a fresh schema all open the store: the
// table is created once, under a lock held until its transaction commits.
func TestPostgresStoreConcurrentCreate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, schema := storeSchema(t)
	const replicas = 6
	errs := make(chan error, replicas)
	start := make(chan struct{})
	for range replicas {
		go func() {
			<-start
			_, err := api.NewPostgresStore(ctx, pool, schema)
			errs <- err
		}()
	}
	close(start)
	for range replicas {
		if err := <-errs; err != nil {
			t.Fatalf("a replica failed to open the store: %v", err)
		}
	}
}
