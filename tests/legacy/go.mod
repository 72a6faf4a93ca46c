// Old Go clients that speak the request versions Kafka 4 removed, driven by
// tests/interop/test_legacy_clients.py against krabka.legacy.protocol.enable.
module krabka.test/legacy

go 1.21

require (
	github.com/Shopify/sarama v1.22.0
	github.com/segmentio/kafka-go v0.2.0
)

require (
	github.com/DataDog/zstd v1.3.5 // indirect
	github.com/davecgh/go-spew v1.1.1 // indirect
	github.com/eapache/go-resiliency v1.1.0 // indirect
	github.com/eapache/go-xerial-snappy v0.0.0-20180814174437-776d5712da21 // indirect
	github.com/eapache/queue v1.1.0 // indirect
	github.com/golang/snappy v0.0.1 // indirect
	github.com/pierrec/lz4 v0.0.0-20190327172049-315a67e90e41 // indirect
	github.com/rcrowley/go-metrics v0.0.0-20181016184325-3113b8401b8a // indirect
	golang.org/x/net v0.0.0-20190404232315-eb5bcb51f2a3 // indirect
)
