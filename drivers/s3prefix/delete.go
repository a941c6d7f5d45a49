package s3prefix

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"gocloud.dev/gcerrors"
)

// maxBatchDelete is S3's limit of keys per DeleteObjects request.
const maxBatchDelete = 1000

// rawKey reports whether gocloud's s3blob stores key unchanged, so that
// it can be handed to the S3 client directly: no control characters, no
// "../", and no "__0x" that its escaping would double.
func rawKey(key string) bool {
	if strings.Contains(key, "../") || strings.Contains(key, "__0x") {
		return false
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 32 {
			return false
		}
	}
	return true
}

// deleteKeys deletes keys, ignoring those already gone. On S3 it uses
// DeleteObjects, a thousand keys per request (gocloud's Delete costs a
// HEAD and a DELETE per key); elsewhere it deletes key by key, conc at a
// time.
func (b *bucket) deleteKeys(ctx context.Context, keys []string, conc int) error {
	var single []string
	if b.s3 != nil {
		var batch []s3types.ObjectIdentifier
		for _, k := range keys {
			if rawKey(k) {
				batch = append(batch, s3types.ObjectIdentifier{Key: aws.String(k)})
			} else {
				single = append(single, k)
			}
		}
		for len(batch) > 0 {
			n := min(len(batch), maxBatchDelete)
			out, err := b.s3.DeleteObjects(ctx, &s3.DeleteObjectsInput{
				Bucket: aws.String(b.name),
				Delete: &s3types.Delete{Objects: batch[:n], Quiet: aws.Bool(true)},
			})
			if err != nil {
				return fmt.Errorf("delete %d objects: %w", n, err)
			}
			for _, e := range out.Errors {
				if aws.ToString(e.Code) != "NoSuchKey" {
					return fmt.Errorf("delete %s: %s: %s", aws.ToString(e.Key), aws.ToString(e.Code), aws.ToString(e.Message))
				}
			}
			batch = batch[n:]
		}
	} else {
		single = keys
	}
	errs := make([]error, len(single))
	parallel(len(single), conc, func(i int) {
		if err := b.b.Delete(ctx, single[i]); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
			errs[i] = fmt.Errorf("delete %s: %w", single[i], err)
		}
	})
	return errors.Join(errs...)
}
