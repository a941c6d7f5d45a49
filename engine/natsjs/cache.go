package natsjs

import lru "github.com/hashicorp/golang-lru/v2"

// maxCachedPlaybooks bounds the playbooks a worker keeps parsed and the
// playbook hashes a dispatcher remembers having stored. Both grow with
// the distinct playbook sources run, not with the work in flight: a
// long-lived process that runs generated or edited playbooks (each a new
// hash) would otherwise keep every one of them for its life. A hash
// evicted costs one bucket round trip when it comes back.
const maxCachedPlaybooks = 256

// newCache returns a least-recently-used cache of maxCachedPlaybooks
// entries by playbook hash, safe for concurrent use.
func newCache[V any]() *lru.Cache[string, V] {
	c, err := lru.New[string, V](maxCachedPlaybooks)
	if err != nil {
		panic(err) // only for a size below 1
	}
	return c
}
