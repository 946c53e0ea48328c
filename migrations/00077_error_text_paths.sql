-- +goose Up
-- Error texts stored before issue 47 may name a worker's scratch paths
-- (/tmp/dubflow-extract_audio-3141/source.mp4); new ones are cut to the
-- path's last element where they are written (wire.ErrorText). The same
-- cut for the rows already there, so that the API and dubctl show
-- "source.mp4": first a path that goes on past its dubflow-… element, then
-- one that ends with it. Only rows that hold such a path are rewritten.
-- +goose StatementBegin
CREATE FUNCTION pg_temp.cut_scratch(s text) RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT regexp_replace(regexp_replace(s,
        '(^|[[:space:]"''(=:])(/[^[:space:]/"''()<>,;]+)*/dubflow-[^[:space:]/"''()<>,;]*(/[^[:space:]/"''()<>,;]+)*/([^[:space:]/"''()<>,;]+)',
        '\1\4', 'g'),
        '(^|[[:space:]"''(=:])(/[^[:space:]/"''()<>,;]+)*/(dubflow-[^[:space:]/"''()<>,;]*)',
        '\1\3', 'g')
$$;
-- +goose StatementEnd
UPDATE tasks SET error = pg_temp.cut_scratch(error) WHERE error LIKE '%/dubflow-%';
UPDATE task_steps SET error = pg_temp.cut_scratch(error) WHERE error LIKE '%/dubflow-%';
UPDATE dead_letters SET failure_reason = pg_temp.cut_scratch(failure_reason) WHERE failure_reason LIKE '%/dubflow-%';
UPDATE dead_letters_archive SET failure_reason = pg_temp.cut_scratch(failure_reason)
 WHERE failure_reason LIKE '%/dubflow-%';

-- +goose Down
SELECT 1;
