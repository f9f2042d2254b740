"""The `pipeline` command (main.py): argument parsing and one function per command. Imports from every
package; nothing imports it."""
