// The shared journals' one schema (adapters/sql-journal/src/schema.sql, copied to
// hosts/node/gen by its build), bundled into a Worker as text.
import SCHEMA from '../../node/gen/schema.sql';

export default SCHEMA;
