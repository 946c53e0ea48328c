-- +goose Up
-- emit_when_part_done: stages overlap (issue 14). Each translate batch has
-- its own tts part, emitted once both the batch and the whole asr step have
-- succeeded — by whichever commits last: the batch (emit_when_steps_done
-- over asr) or the asr part that completes asr (this function, once per
-- translate part already registered). Serialized by the same lock as
-- emit_when_steps_done for the next step ('fanin/<task>/<next>'), so that a
-- batch and the asr part committing at the same moment cannot both miss the
-- other's success; the next part is emitted at most once (step_parts).
-- +goose StatementBegin
CREATE FUNCTION emit_when_part_done(p_task uuid, p_step text, p_part text, p_next text, p_next_part text,
                                    p_message_id uuid, p_exchange text, p_key text, p_body bytea)
RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    v_id bigint;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended('fanin/' || p_task::text || '/' || p_next, 0));
    IF NOT EXISTS (SELECT 1 FROM task_steps s WHERE s.task_id = p_task AND s.step = p_step
                   AND s.part = p_part AND s.status = 'succeeded') THEN
        RETURN NULL;
    END IF;
    INSERT INTO step_parts (task_id, step, part, message) VALUES (p_task, p_next, p_next_part, p_body)
    ON CONFLICT DO NOTHING;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    INSERT INTO outbox (message_id, exchange, routing_key, body)
    VALUES (p_message_id, p_exchange, p_key, p_body) RETURNING id INTO v_id;
    RETURN v_id;
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION emit_when_part_done(uuid, text, text, text, text, uuid, text, text, bytea);
