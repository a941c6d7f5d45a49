// Package noetlcorpus is the acceptance test of the rest of NoETL's
// playbook corpus (fixtures/playbooks in noetl/e2e, beside the pagination
// playbooks of examples/noetlpagination and the PFT flow of
// examples/pftflow): hello_world, http_test, loop_test, postgres_test,
// v10_canonical_example, the six retry_test playbooks and the broken
// playbook that must be refused. Each runs as it is from the shared
// corpus through the cursorflow CLI.
//
// A run may override workload keys with --set, never the playbook: a URL
// naming httpbin.org, api.example.com or a cluster service points at an
// HTTP server of the test's own that answers what the playbook expects; a
// query, to make a call fail on purpose. A credential the playbook names
// with auth: is a PostgreSQL database of the test's own (--credential),
// holding the tables the playbook expects to find. Each test asserts that
// the execution ended as NoETL intends (completed, or failed where the
// playbook or its override is meant to fail) and checks what the run left
// behind: step results in the event log, rows in PostgreSQL, the requests
// and connections its servers saw. A playbook that does not run as NoETL
// intends is skipped with the exact reason, checked against what the run
// did.
//
// Run them with:
//
//	go test ./examples/noetlcorpus/ -v
package noetlcorpus
