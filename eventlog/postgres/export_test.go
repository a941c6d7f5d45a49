package postgres

// SetExecutionsPage sets how many ids one statement of Executions reads,
// until restore is called. Not for parallel tests.
func SetExecutionsPage(n int) (restore func()) {
	old := executionsPage
	executionsPage = n
	return func() { executionsPage = old }
}
