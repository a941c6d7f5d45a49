package clickhouse

// SetClaimInserted makes d call hook with each claim's token once its
// claims are inserted, before they are read back. Call it before the
// driver's first Open.
func SetClaimInserted(d *Driver, hook func(tok string)) { d.claimInserted = hook }
