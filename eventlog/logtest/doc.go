// Package logtest is the conformance suite of eventlog.Log: every backend
// runs Run against a real instance of its store, so the engine can rely on
// the same behaviour from all of them.
//
//	func TestConformance(t *testing.T) {
//		logtest.Run(t, func(t *testing.T) eventlog.Log {
//			l := mybackend.Open(...)
//			t.Cleanup(func() { l.Close() })
//			return l
//		})
//	}
package logtest
