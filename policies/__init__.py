"""The CrossGuard policy pack (PulumiPolicy.yaml, __main__.py) and its rules, shipped in the
package so that `azdl policy` and `pulumi preview --policy-pack` use the installed pack."""
