"""Security: who a connection is (principal.py, session.py), how it proves it (TLS,
SASL), and what it may do (authorizer.py and the ACLs behind it)."""
