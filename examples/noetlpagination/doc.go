// Package noetlpagination is the acceptance test of NoETL's own pagination
// playbooks (tests/fixtures/playbooks/pagination in noetl/noetl: basic,
// cursor, offset, max_iterations, retry, pipeline/*, pipeline_v2,
// fetch_load_test, loop_with_pagination), each run as it is from the shared
// corpus through the cursorflow CLI against NoETL's mock paginated API
// (internal/paginatedapi) and, where a playbook stores rows, a PostgreSQL
// database of its own.
//
// A run may override workload keys with --set (api_url always; database
// coordinates, and delays that only make a run slower), never the
// playbook. Each test asserts that the execution ended as NoETL intends
// and checks the numbers the playbook leaves behind: step results in the
// event log, rows in PostgreSQL, requests the API saw. A playbook that does
// not run as NoETL intends is skipped with the exact reason, checked
// against what the run did.
//
// Run them with:
//
//	go test ./examples/noetlpagination/ -v
package noetlpagination
