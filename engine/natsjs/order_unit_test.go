package natsjs

import "testing"

// TestCommandOrder: a command's second report waits for its first, and
// for nothing else; reports without a command id never wait; the
// bookkeeping of a command ends with its last report.
func TestCommandOrder(t *testing.T) {
	var o commandOrder
	closedNow := func(c <-chan struct{}) bool {
		select {
		case <-c:
			return true
		default:
			return false
		}
	}
	p1, done1 := o.enter("a")
	if p1 != nil {
		t.Fatal("the first report of a command waits")
	}
	pb, doneB := o.enter("b")
	if pb != nil {
		t.Fatal("another command's report waits for a")
	}
	if p, _ := o.enter(""); p != nil {
		t.Fatal("a report without a command id waits")
	}
	p2, done2 := o.enter("a")
	if p2 == nil || closedNow(p2) {
		t.Fatal("a's second report does not wait for its first")
	}
	p3, done3 := o.enter("a")
	if p3 == nil || closedNow(p3) {
		t.Fatal("a's third report does not wait for its second")
	}
	done1()
	if !closedNow(p2) || closedNow(p3) {
		t.Fatal("the first report's end releases the second only")
	}
	done2()
	if !closedNow(p3) {
		t.Fatal("the second report's end does not release the third")
	}
	done3()
	doneB()
	if len(o.last) != 0 {
		t.Fatalf("%d commands still tracked after their last reports", len(o.last))
	}
}
