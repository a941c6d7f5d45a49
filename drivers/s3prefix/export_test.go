package s3prefix

import "context"

// DiedMidMove writes name's markers as a claimer leaves them that died
// after its Ack's copy to the done prefix and before its deletes: the
// claim's lease, then the Ack's done marker, the latest. The objects are
// the caller's to place.
func (c *Cursor) DiedMidMove(ctx context.Context, name string) error {
	for gen, st := range []string{stateLeased, stateDone} {
		if _, err := c.create(ctx, name, int64(gen+1), marker{State: st, Attempt: 1}); err != nil {
			return err
		}
	}
	return nil
}
