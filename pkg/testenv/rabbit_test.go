package testenv_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/testenv"
	amqp "github.com/rabbitmq/amqp091-go"
)

func publish(t *testing.T, ch *amqp.Channel, queue, body string) {
	t.Helper()
	if err := ch.Confirm(false); err != nil {
		t.Fatalf("confirm mode: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conf, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", queue, true, false, amqp.Publishing{
		DeliveryMode: amqp.Persistent,
		Body:         []byte(body),
	})
	if err != nil {
		t.Fatalf("publish: %v", err)
	}
	if ok, err := conf.WaitContext(ctx); err != nil || !ok {
		t.Fatalf("publish not confirmed: ok=%v err=%v", ok, err)
	}
}

func get(t *testing.T, ch *amqp.Channel, queue string) string {
	t.Helper()
	msg, ok, err := ch.Get(queue, true)
	if err != nil {
		t.Fatalf("get from %s: %v", queue, err)
	}
	if !ok {
		t.Fatalf("get from %s: queue empty", queue)
	}
	return string(msg.Body)
}

func TestAMQPVirtualHostsAreIsolated(t *testing.T) {
	var first string
	t.Run("use", func(t *testing.T) {
		first = testenv.AMQP(t)
		second := testenv.AMQP(t)
		if first == second {
			t.Fatalf("two calls returned the same URL %s", first)
		}
		a := testenv.Channel(t, first)
		if _, err := a.QueueDeclare("jobs", true, false, false, false, nil); err != nil {
			t.Fatalf("declare queue: %v", err)
		}
		publish(t, a, "jobs", "hello")
		if got := get(t, a, "jobs"); got != "hello" {
			t.Fatalf("got %q, want hello", got)
		}

		b := testenv.Channel(t, second)
		_, err := b.QueueDeclarePassive("jobs", true, false, false, false, nil)
		var amqpErr *amqp.Error
		if !errors.As(err, &amqpErr) || amqpErr.Code != amqp.NotFound {
			t.Fatalf("queue of the first virtual host visible in the second: err=%v", err)
		}
	})
	// The subtest's cleanup deleted its virtual hosts.
	if conn, err := amqp.Dial(first); err == nil {
		_ = conn.Close()
		t.Fatalf("virtual host of %s still accepts connections after cleanup", first)
	}
}

func TestPrivateRabbitSurvivesRestartAndKill(t *testing.T) {
	r := testenv.PrivateRabbit(t)
	conn, err := amqp.Dial(r.URL())
	if err != nil {
		t.Fatalf("dial %s: %v", r.URL(), err)
	}
	closed := conn.NotifyClose(make(chan *amqp.Error, 1))
	ch, err := conn.Channel()
	if err != nil {
		t.Fatalf("open channel: %v", err)
	}
	if _, err := ch.QueueDeclare("durable", true, false, false, false, nil); err != nil {
		t.Fatalf("declare queue: %v", err)
	}
	publish(t, ch, "durable", "before restart")

	r.Restart()
	select {
	case <-closed:
	case <-time.After(30 * time.Second):
		t.Fatal("connection not closed by the broker's restart")
	}
	ch = testenv.Channel(t, r.URL())
	if got := get(t, ch, "durable"); got != "before restart" {
		t.Fatalf("after restart got %q, want the persisted message", got)
	}
	publish(t, ch, "durable", "before kill")

	r.Kill()
	if _, err := amqp.Dial(r.URL()); err == nil {
		t.Fatal("killed broker still accepts connections")
	}
	r.Start()
	ch = testenv.Channel(t, r.URL())
	if got := get(t, ch, "durable"); got != "before kill" {
		t.Fatalf("after kill got %q, want the confirmed message", got)
	}
}
