#!/usr/bin/python3
"""Runs rdma-core's pyverbs tests, unpacked in a folder, and checks the outcome.

Usage: pyverbs_run.py TESTS_DIR SKIPS_FILE --dev NAME [--port N] [--gid N] [--write-skips FILE]

TESTS_DIR holds the suite as Debian's python3-pyverbs ships it (tests/__init__.py imports
every test_*.py beside it, so the caller unpacks only the modules it wants run). The run fails
if a test fails or errors, if a test skips that SKIPS_FILE does not list with that reason, or if
a test that SKIPS_FILE lists does not skip (a feature arrived: drop its lines).

SKIPS_FILE: one skip per line, `<test id> | <reason as the suite gives it>`; the test id leaves
out the leading `tests.`. A test may have several lines when its reason depends on the host
(huge pages, GPUs); any of them matches. A line ending in ` | host` names a skip that only some
hosts cause (no 2 MiB huge pages): there the test may also run, and must then pass. `#` starts
a comment line.
"""
import argparse
import collections
import importlib.machinery
import os
import sys
import unittest


def read_expected_skips(path):
    expected = collections.defaultdict(set)
    host_dependent = set()
    with open(path, encoding='utf-8') as f:
        for number, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith('#'):
                continue
            test_id, sep, reason = line.partition(' | ')
            if not sep:
                sys.exit(f'{path}:{number}: expected "<test id> | <reason>"')
            reason, host_sep, marker = reason.rpartition(' | ')
            if not host_sep:
                reason = marker
            elif marker.strip() == 'host':
                host_dependent.add(test_id.strip())
            else:
                sys.exit(f'{path}:{number}: expected "| host" or nothing after the reason')
            expected[test_id.strip()].add(reason.strip())
    return expected, host_dependent


def short_id(test):
    # A skip raised in setUpClass is reported on a holder whose id is "setUpClass (tests.x.C)".
    test_id = test.id()
    return test_id[len('tests.'):] if test_id.startswith('tests.') else test_id


def main():
    cli = argparse.ArgumentParser()
    cli.add_argument('tests_dir')
    cli.add_argument('skips_file')
    cli.add_argument('--dev', required=True)
    cli.add_argument('--port', default='1')
    cli.add_argument('--gid', default='0')
    cli.add_argument('--write-skips', help='also write the skips seen, in SKIPS_FILE format')
    args = cli.parse_args()

    tests_dir = os.path.abspath(args.tests_dir)
    sys.path.insert(0, tests_dir)
    # The suite reads its options from sys.argv through its own parser (args_parser.py).
    sys.argv = [sys.argv[0], '--dev', args.dev, '--port', args.port, '--gid', args.gid]
    from args_parser import parser
    parser.parse_args()
    # As the suite's run_tests.py does: load the folder as the package `tests`.
    loader = importlib.machinery.SourceFileLoader('tests', os.path.join(tests_dir, '__init__.py'))
    tests = loader.load_module()
    suite = unittest.defaultTestLoader.loadTestsFromModule(tests)
    result = unittest.TextTestRunner(stream=sys.stdout, verbosity=2).run(suite)

    expected, host_dependent = read_expected_skips(args.skips_file)
    seen = {short_id(test): reason for test, reason in result.skipped}
    problems = []
    for test, trace in result.failures + result.errors:
        problems.append(f'{short_id(test)}: failed\n{trace}')
    for test in result.unexpectedSuccesses:
        problems.append(f'{short_id(test)}: unexpected success')
    for test_id, reason in sorted(seen.items()):
        if test_id not in expected:
            problems.append(f'new skip: {test_id} | {reason}')
        elif reason not in expected[test_id]:
            problems.append(f'skip reason changed: {test_id} | {reason}')
    for test_id in sorted(set(expected) - set(seen) - host_dependent):
        problems.append(f'listed as skipped but did not skip (ran or is gone): {test_id}')

    if args.write_skips:
        with open(args.write_skips, 'w', encoding='utf-8') as f:
            for test_id, reason in sorted(seen.items()):
                f.write(f'{test_id} | {reason}\n')

    failed = len(result.failures) + len(result.errors)
    passed = result.testsRun - failed - len(result.skipped) - len(result.expectedFailures) - \
        len(result.unexpectedSuccesses)
    print(f'pyverbs: {result.testsRun} tests, {passed} passed, {len(result.skipped)} skipped, '
          f'{len(result.failures)} failures, {len(result.errors)} errors')
    for problem in problems:
        print(f'FAIL: {problem}')
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main())
