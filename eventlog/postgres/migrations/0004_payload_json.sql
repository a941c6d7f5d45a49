-- Payloads and metas as json, not jsonb. The log hands back the bytes it
-- was given, as the SQLite and in-memory logs do, and json only checks
-- the text where jsonb also builds its binary form: for a frame's rows
-- and outcomes that was the largest part of an append's cost. Nothing
-- queries inside them in SQL. Upgrading rewrites the events table once.
ALTER TABLE {{schema}}.events
	ALTER COLUMN payload TYPE json USING payload::json,
	ALTER COLUMN meta TYPE json USING meta::json;

-- lz4 compresses a frame's large payloads for a fraction of pglz's CPU.
-- A server before PostgreSQL 14, or built without lz4, keeps pglz.
DO $migrate$
BEGIN
	EXECUTE format('ALTER TABLE %s.events ALTER COLUMN payload SET COMPRESSION lz4, ALTER COLUMN meta SET COMPRESSION lz4',
		{{schema_literal}});
EXCEPTION WHEN feature_not_supported OR syntax_error THEN
	NULL;
END
$migrate$;
