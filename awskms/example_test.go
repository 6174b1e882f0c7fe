package awskms_test

import (
	"context"
	"log"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/kms"

	"github.com/sessionstore/sessionstore/awskms"
)

// A Provider over a KMS key, with the client configured from the
// environment as the AWS SDK does (needs AWS credentials, so no Output).
func Example() {
	ctx := context.Background()
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		log.Fatal(err)
	}
	keys := awskms.New(kms.NewFromConfig(cfg), "alias/sessionstore")
	id, wrapped, err := keys.Wrap(ctx, make([]byte, 32), []byte("a session's id"))
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("wrapped under %s: %d bytes", id, len(wrapped))
}
