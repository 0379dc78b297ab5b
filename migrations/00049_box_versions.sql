-- A version for each box that every change of its row moves to a value
-- the box never had, so that a server may keep what it computed from a
-- box's entries (an assembly's candidates, cardbox/prepared.go) and trust
-- it while the version it read with it is the box's version now.
--
-- A row trigger sets it from one sequence on every INSERT and UPDATE,
-- whoever writes: this server, another process or plain SQL. The sequence
-- never goes back, so a box purged and made again under the same id does
-- not meet a version its predecessor had. Rows older than this migration
-- keep 0 until their next change, which gives them a value from the
-- sequence (never 0). The function runs as its owner: the roles that
-- write boxes need no rights on the sequence.

-- +goose Up
CREATE SEQUENCE box_versions;
ALTER TABLE boxes ADD COLUMN version bigint NOT NULL DEFAULT 0;

-- +goose StatementBegin
CREATE FUNCTION next_box_version() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
BEGIN
    NEW.version := nextval('box_versions');
    RETURN NEW;
END
$$;
-- +goose StatementEnd
REVOKE EXECUTE ON FUNCTION next_box_version() FROM PUBLIC;

CREATE TRIGGER boxes_version BEFORE INSERT OR UPDATE ON boxes
    FOR EACH ROW EXECUTE FUNCTION next_box_version();

-- +goose Down
DROP TRIGGER boxes_version ON boxes;
DROP FUNCTION next_box_version();
ALTER TABLE boxes DROP COLUMN version;
DROP SEQUENCE box_versions;
