// Package sqllog holds what the SQL-backed event logs (eventlog/postgres and
// eventlog/sqlite) share: the closed state and wake-up hub behind Append's
// checks and Wait's loop, the mapping of operation errors, and the loading
// of embedded, numbered migration files.
package sqllog
