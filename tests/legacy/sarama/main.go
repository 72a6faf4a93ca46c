// Command sarama drives sarama v1.22.0 with its default configuration
// (Kafka version 0.8.2: Metadata v0, Produce v0 with message format v0,
// Fetch v0, ListOffsets v0, OffsetCommit v1, OffsetFetch v1), the client
// Debian ships, against a broker.
//
//	sarama produce BROKER TOPIC COUNT CODEC   # CODEC: none, gzip, snappy
//	sarama consume BROKER TOPIC GROUP COUNT   # commits what it read
//
// consume starts at the group's committed offset (the oldest when none),
// reads COUNT messages from partition 0, commits after each and prints one
// JSON object: {"first": offset, "values": [...]}.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/Shopify/sarama"
)

func main() {
	if len(os.Args) < 2 {
		fail(fmt.Errorf("usage: sarama produce|consume ..."))
	}
	var err error
	switch os.Args[1] {
	case "produce":
		err = produce(os.Args[2], os.Args[3], atoi(os.Args[4]), os.Args[5])
	case "consume":
		err = consume(os.Args[2], os.Args[3], os.Args[4], atoi(os.Args[5]))
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "error:", err)
	os.Exit(1)
}

func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		fail(err)
	}
	return n
}

func config() *sarama.Config {
	c := sarama.NewConfig() // Version: sarama.MinVersion (0.8.2.0)
	c.ClientID = "sarama-1.22-legacy-test"
	c.Metadata.Retry.Max = 10
	c.Metadata.Retry.Backoff = 200 * time.Millisecond
	return c
}

func produce(broker, topic string, count int, codec string) error {
	c := config()
	c.Producer.Return.Successes = true
	c.Producer.RequiredAcks = sarama.WaitForAll
	c.Producer.Partitioner = sarama.NewManualPartitioner
	c.Producer.Retry.Max = 10
	switch codec {
	case "none":
	case "gzip":
		c.Producer.Compression = sarama.CompressionGZIP
	case "snappy":
		c.Producer.Compression = sarama.CompressionSnappy
	default:
		return fmt.Errorf("unknown codec %q", codec)
	}
	// Batch the messages, so a compressed request holds many in one wrapper.
	c.Producer.Flush.Messages = count
	c.Producer.Flush.Frequency = 50 * time.Millisecond
	p, err := sarama.NewAsyncProducer([]string{broker}, c)
	if err != nil {
		return err
	}
	for i := 0; i < count; i++ {
		p.Input() <- &sarama.ProducerMessage{
			Topic:     topic,
			Partition: 0,
			Key:       sarama.StringEncoder(fmt.Sprintf("k%d", i)),
			Value:     sarama.StringEncoder(fmt.Sprintf("%s-%d", codec, i)),
		}
	}
	for i := 0; i < count; i++ {
		select {
		case <-p.Successes():
		case e := <-p.Errors():
			return e.Err
		case <-time.After(30 * time.Second):
			return fmt.Errorf("timed out waiting for acks")
		}
	}
	return p.Close()
}

func consume(broker, topic, group string, count int) error {
	c := config()
	c.Consumer.Offsets.Initial = sarama.OffsetOldest
	c.Consumer.Return.Errors = true
	client, err := sarama.NewClient([]string{broker}, c)
	if err != nil {
		return err
	}
	defer client.Close()
	om, err := sarama.NewOffsetManagerFromClient(group, client)
	if err != nil {
		return err
	}
	pom, err := om.ManagePartition(topic, 0)
	if err != nil {
		return err
	}
	next, _ := pom.NextOffset()
	consumer, err := sarama.NewConsumerFromClient(client)
	if err != nil {
		return err
	}
	pc, err := consumer.ConsumePartition(topic, 0, next)
	if err != nil {
		return err
	}
	out := struct {
		First  int64    `json:"first"`
		Values []string `json:"values"`
	}{First: -1, Values: []string{}}
	for len(out.Values) < count {
		select {
		case m := <-pc.Messages():
			if out.First < 0 {
				out.First = m.Offset
			}
			out.Values = append(out.Values, string(m.Value))
			pom.MarkOffset(m.Offset+1, "")
		case e := <-pc.Errors():
			return e
		case e := <-pom.Errors():
			return e
		case <-time.After(30 * time.Second):
			return fmt.Errorf("timed out after %d messages", len(out.Values))
		}
	}
	if err := pc.Close(); err != nil {
		return err
	}
	// Closing the partition offset manager commits what was marked.
	if err := pom.Close(); err != nil {
		return err
	}
	if err := om.Close(); err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(out)
}
