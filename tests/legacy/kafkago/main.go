// Command kafkago drives segmentio/kafka-go v0.2.0, which negotiates no
// versions: CreateTopics v0, Metadata v1, Produce v2 (message format v1),
// Fetch v1 (message format v0), ListOffsets v1.
//
//	kafkago create  BROKER TOPIC
//	kafkago produce BROKER TOPIC COUNT
//	kafkago consume BROKER TOPIC COUNT   # prints {"offsets": [...], "values": [...]}
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"time"

	kafka "github.com/segmentio/kafka-go"
)

func main() {
	if len(os.Args) < 4 {
		fail(fmt.Errorf("usage: kafkago create|produce|consume BROKER TOPIC [COUNT]"))
	}
	broker, topic := os.Args[2], os.Args[3]
	var err error
	switch os.Args[1] {
	case "create":
		err = create(broker, topic)
	case "produce":
		err = produce(broker, topic, atoi(os.Args[4]))
	case "consume":
		err = consume(broker, topic, atoi(os.Args[4]))
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

func create(broker, topic string) error {
	conn, err := kafka.Dial("tcp", broker)
	if err != nil {
		return err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	return conn.CreateTopics(kafka.TopicConfig{Topic: topic, NumPartitions: 1, ReplicationFactor: 1})
}

func leader(broker, topic string) (*kafka.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := kafka.DialLeader(ctx, "tcp", broker, topic, 0)
	if err != nil {
		return nil, err
	}
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	return conn, nil
}

func produce(broker, topic string, count int) error {
	conn, err := leader(broker, topic)
	if err != nil {
		return err
	}
	defer conn.Close()
	msgs := make([]kafka.Message, count)
	for i := range msgs {
		msgs[i] = kafka.Message{Key: []byte(fmt.Sprintf("k%d", i)), Value: []byte(fmt.Sprintf("kafka-go-%d", i))}
	}
	_, err = conn.WriteMessages(msgs...)
	return err
}

func consume(broker, topic string, count int) error {
	conn, err := leader(broker, topic)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.Seek(0, kafka.SeekAbsolute); err != nil {
		return err
	}
	out := struct {
		Offsets []int64  `json:"offsets"`
		Values  []string `json:"values"`
	}{Offsets: []int64{}, Values: []string{}}
	for len(out.Values) < count {
		batch := conn.ReadBatch(1, 1<<20)
		for len(out.Values) < count {
			m, err := batch.ReadMessage()
			if err != nil {
				break
			}
			out.Offsets = append(out.Offsets, m.Offset)
			out.Values = append(out.Values, string(m.Value))
		}
		if err := batch.Close(); err != nil {
			return err
		}
	}
	return json.NewEncoder(os.Stdout).Encode(out)
}
