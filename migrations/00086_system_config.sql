-- +goose Up
-- Seed 003's system_config (issue 48): the settings operators tune at run
-- time, one row per key (pkg/setting's catalogue names every key, what it
-- means, its type and bounds, and the environment variable that gives its
-- first value). A service seeds the keys it uses on its first start; after
-- that the row is the value (the console's PUT /api/config/{key}, dubctl
-- config set), and every running service reads it again within seconds:
-- each change is announced on the channel dubflow_settings (payload: the
-- key), and the services read the table again every few seconds anyway.
--
-- value is text as the seed's; value_type (integer, number, boolean,
-- string) and constraints ({"min": .., "max": ..} and/or {"enum": [..]})
-- say what it may hold. system_config_problem judges a value against them
-- with the same words as pkg/setting's Check, and the trigger below refuses
-- every row it finds a problem with, whoever writes it.
CREATE TABLE system_config (
    key         text PRIMARY KEY CHECK (key ~ '^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$'),
    value       text NOT NULL,
    category    text NOT NULL DEFAULT 'general',
    description text NOT NULL DEFAULT '',
    value_type  text NOT NULL DEFAULT 'string' CHECK (value_type IN ('integer', 'number', 'boolean', 'string')),
    constraints jsonb NOT NULL DEFAULT '{}'::jsonb CHECK (jsonb_typeof(constraints) = 'object'),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    updated_by  text NOT NULL DEFAULT ''
);

-- system_config_problem says what is wrong with p_value for the key (NULL:
-- nothing). The texts are pkg/setting's (TestDoorsRefuseWithOneText).
-- +goose StatementBegin
CREATE FUNCTION system_config_problem(p_key text, p_value text, p_type text, p_constraints jsonb)
RETURNS text LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    v_num numeric;
    v_min text := p_constraints->>'min';
    v_max text := p_constraints->>'max';
BEGIN
    IF length(p_value) > 200 THEN
        RETURN format('%s: want a value of at most 200 characters', p_key);
    END IF;
    IF p_type = 'integer' AND p_value !~ '^-?(0|[1-9][0-9]{0,14})$' THEN
        RETURN format('%s "%s": want an integer', p_key, p_value);
    ELSIF p_type = 'number' AND p_value !~ '^-?(0|[1-9][0-9]{0,14})(\.[0-9]{1,9})?$' THEN
        RETURN format('%s "%s": want a number', p_key, p_value);
    ELSIF p_type = 'boolean' AND p_value NOT IN ('true', 'false') THEN
        RETURN format('%s "%s": want true or false', p_key, p_value);
    END IF;
    IF p_type IN ('integer', 'number') THEN
        v_num := p_value::numeric;
        IF v_min IS NOT NULL AND v_max IS NOT NULL AND (v_num < v_min::numeric OR v_num > v_max::numeric) THEN
            RETURN format('%s %s: want %s..%s', p_key, p_value, v_min, v_max);
        ELSIF v_min IS NOT NULL AND v_num < v_min::numeric THEN
            RETURN format('%s %s: want at least %s', p_key, p_value, v_min);
        ELSIF v_max IS NOT NULL AND v_num > v_max::numeric THEN
            RETURN format('%s %s: want at most %s', p_key, p_value, v_max);
        END IF;
    END IF;
    IF p_constraints ? 'enum' AND NOT (p_constraints->'enum') ? p_value THEN
        RETURN format('%s "%s": want one of %s', p_key, p_value,
                      (SELECT string_agg(e, ', ') FROM jsonb_array_elements_text(p_constraints->'enum') e));
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- system_config_check refuses a row whose value does not fit its type and
-- constraints (check_violation, constraint system_config_value, with the
-- problem as the message) and stamps updated_at.
-- +goose StatementBegin
CREATE FUNCTION system_config_check() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    v_problem text := system_config_problem(NEW.key, NEW.value, NEW.value_type, NEW.constraints);
BEGIN
    IF v_problem IS NOT NULL THEN
        RAISE EXCEPTION USING MESSAGE = v_problem, ERRCODE = 'check_violation',
            TABLE = 'system_config', CONSTRAINT = 'system_config_value';
    END IF;
    IF TG_OP = 'UPDATE' AND NEW.value IS DISTINCT FROM OLD.value THEN
        NEW.updated_at := greatest(NEW.updated_at, now());
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER system_config_check BEFORE INSERT OR UPDATE ON system_config
    FOR EACH ROW EXECUTE FUNCTION system_config_check();

-- system_config_notify announces every change on dubflow_settings.
-- +goose StatementBegin
CREATE FUNCTION system_config_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('dubflow_settings', coalesce(NEW.key, OLD.key));
    RETURN NULL;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER system_config_notify AFTER INSERT OR UPDATE OR DELETE ON system_config
    FOR EACH ROW EXECUTE FUNCTION system_config_notify();

-- +goose Down
DROP TABLE system_config;
DROP FUNCTION system_config_notify();
DROP FUNCTION system_config_check();
DROP FUNCTION system_config_problem(text, text, text, jsonb);
