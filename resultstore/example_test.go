package resultstore_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/cursorflow/cursorflow/resultstore"
	"github.com/cursorflow/cursorflow/resultstore/resultstoreurl"
)

// A result over the threshold is written once and travels as a
// reference; reading it back checks its size and SHA-256.
func Example() {
	ctx := context.Background()
	store, err := resultstoreurl.Open(ctx, "mem://", 0) // or file:///dir, s3://bucket?region=...
	if err != nil {
		panic(err)
	}
	defer store.Close()

	result := []byte(`{"rows":"` + strings.Repeat("x", 100_000) + `"}`)
	fmt.Println("stored:", int64(len(result)) > store.Threshold())
	ref, err := store.Put(ctx, "0190a5c2-execution/fetch#1@1", result)
	if err != nil {
		panic(err)
	}
	fmt.Println(ref.Size, strings.HasPrefix(ref.URI, "mem:///results/0190a5c2-execution/fetch_1_1/"))
	back, err := store.Get(ctx, ref)
	if err != nil {
		panic(err)
	}
	fmt.Println(len(back), resultstore.HasRef(map[string]any{"data": ref.Marker()}))
	// Output:
	// stored: true
	// 100011 true
	// 100011 true
}
