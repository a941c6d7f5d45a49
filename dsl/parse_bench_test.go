package dsl

import (
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkParsePFTFlowV2 parses the largest corpus playbook (about 1,900
// lines, many templates) end to end: YAML, decoding, template compilation
// and validation.
func BenchmarkParsePFTFlowV2(b *testing.B) {
	path := filepath.Join(corpusDir(b), "pft_flow_test", "test_pft_flow_v2.yaml")
	src, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(src)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(path, src); err != nil {
			b.Fatal(err)
		}
	}
}
