"""Stage 2, validate: a loaded run file into every problem it has, located and explained: the
JSON Schema (a fast yes/no first, then jsonschema's messages), the rules a schema cannot say
(rules/), and the site policy that judges each normalised job (policy, policy_rules). The only
package that imports jsonschema. Changes no data. Imports core, model and read."""
