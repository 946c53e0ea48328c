package main

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/dubflow/dubflow/pkg/broker"
	"github.com/dubflow/dubflow/pkg/recovery"
	"github.com/dubflow/dubflow/pkg/service"
	"github.com/dubflow/dubflow/pkg/step"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/rs/zerolog"
)

// name is the service's name in logs and broker connections.
const name = "dlq_recorder"

// run records task.dlq and task.tts_compensation until ctx is cancelled,
// logging to logOut (standard output when nil).
func run(ctx context.Context, environ map[string]string, logOut io.Writer) error {
	var cfg Config
	p, err := service.Start(ctx, name, environ, &cfg, service.Migrate(), service.LogTo(logOut))
	if err != nil {
		return err
	}
	defer p.Close()
	recovery.AtStart(ctx, p) // logged; the reconciler retries what fails
	conn, err := p.Consumer(ctx)
	if err != nil {
		return err
	}
	p.Ready("consumer", func(context.Context) error {
		if !conn.Consuming() {
			return errors.New("not consuming " + wire.QueueDLQ + " and " + wire.QueueTTSCompensation)
		}
		return nil
	})
	c := &consumers{rec: &recorder{pool: p.Pool, pub: p.Publisher()}, metrics: newMetrics(p.Registry), log: p.Log}
	p.Log.Info().Int("concurrency", cfg.RecordConcurrency).Msg("dlq_recorder starting")
	// The workers' consumer and hand-back rules (step.BrokerSource,
	// step.Settler): a message that cannot be recorded yet (the database is
	// down, say) is handed back after a pause that grows while hand-backs
	// follow each other.
	consume := func(queue, tag string, handle func(context.Context, step.Delivery, *step.Settler)) service.Job {
		return func(ctx context.Context) error {
			var settle step.Settler
			src := step.BrokerSource(conn, broker.ConsumeOptions{Queue: queue, Concurrency: cfg.RecordConcurrency,
				Tag: name + "-" + tag})
			return src.Consume(ctx, func(ctx context.Context, d step.Delivery) { handle(ctx, d, &settle) })
		}
	}
	return p.Run(ctx, consume(wire.QueueDLQ, "dlq", c.deadLetter),
		consume(wire.QueueTTSCompensation, "compensation", c.compensation))
}

// consumers handle the deliveries of the two queues.
type consumers struct {
	rec     *recorder
	metrics *metrics
	log     zerolog.Logger
}

// deadLetter records one delivery of task.dlq, then acks it. A delivery
// that cannot be recorded is handed back, never acked.
func (c *consumers) deadLetter(ctx context.Context, d step.Delivery, settle *step.Settler) {
	dl := parseDeadLetter(d, time.Now())
	log := c.log.With().Str("message_id", dl.MessageID).Str("step", dl.Step).Int("attempt", dl.Attempt).
		Str("error_class", dl.ErrorClass).Str("source", dl.Source).Str("trace_id", dl.TraceID).Logger()
	if dl.TaskID != nil {
		log = log.With().Str("task_id", dl.TaskID.String()).Logger()
	}
	out, err := c.rec.deadLetter(ctx, dl)
	if err != nil && out.ID == 0 && !out.Failed {
		c.metrics.errors.WithLabelValues(wire.QueueDLQ).Inc()
		log.Error().Err(err).Msg("dead letter not recorded; handed back")
		settle.HandBack(ctx, d, log)
		return
	}
	if err != nil {
		// Recorded; only the event's immediate publish failed.
		log.Warn().Err(err).Msg("event left in the outbox for the sweep")
	}
	if out.ID == 0 {
		c.metrics.duplicates.Inc()
		log.Info().Msg("dead letter recorded before; duplicate acked")
	} else {
		c.metrics.deadLetters.WithLabelValues(dl.Step, dl.ErrorClass, dl.Source).Inc()
		log.Error().Int64("dead_letter_id", out.ID).Bool("task_failed", out.Failed).
			Str("routing_key", dl.RoutingKey).Str("reason", dl.Reason).Msg("dead letter recorded")
	}
	settle.Ack(d, log)
}

// compensation records one delivery of task.tts_compensation against its
// segment, then acks it. An unreadable message is recorded as a dead letter.
func (c *consumers) compensation(ctx context.Context, d step.Delivery, settle *step.Settler) {
	id := messageID(d.MessageID, d.Body)
	log := c.log.With().Str("message_id", id).Str("queue", wire.QueueTTSCompensation).Logger()
	msg, err := wire.DecodeCompensation(d.Body)
	if err != nil {
		dl := &deadLetter{MessageID: id, Raw: d.Body, RoutingKey: d.RoutingKey, Source: sourceUnknown,
			ErrorClass: wire.ClassInvalid, Step: wire.StepTTS, FailedAt: time.Now().UTC(),
			Reason: "invalid message in " + wire.QueueTTSCompensation + ": " + err.Error()}
		dl.describeOriginal(d.Body)
		if _, rerr := c.rec.deadLetter(ctx, dl); rerr != nil {
			c.metrics.errors.WithLabelValues(wire.QueueTTSCompensation).Inc()
			log.Error().Err(rerr).Msg("invalid compensation message not recorded; handed back")
			settle.HandBack(ctx, d, log)
			return
		}
		c.metrics.deadLetters.WithLabelValues(dl.Step, dl.ErrorClass, dl.Source).Inc()
		log.Error().Err(err).Msg("invalid compensation message recorded as a dead letter")
		settle.Ack(d, log)
		return
	}
	log = log.With().Str("task_id", msg.TaskID.String()).Int("segment_idx", msg.SegmentIdx).
		Str("trace_id", msg.TraceID).Logger()
	fresh, err := c.rec.compensation(ctx, id, msg)
	if err != nil {
		c.metrics.errors.WithLabelValues(wire.QueueTTSCompensation).Inc()
		log.Error().Err(err).Msg("compensation not recorded; handed back")
		settle.HandBack(ctx, d, log)
		return
	}
	if fresh {
		c.metrics.compensations.Inc()
		log.Warn().Str("error", msg.Error).Msg("tts compensation recorded; tts_requeue re-drives the task")
	} else {
		log.Info().Msg("compensation recorded before; duplicate acked")
	}
	settle.Ack(d, log)
}
