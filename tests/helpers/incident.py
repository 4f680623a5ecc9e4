"""The inventory of remediate.yml runs on a writable copy of the incident snapshot."""
import shutil


def incident_inventory(root, **hostvars):
    """gpu-incident on the snapshot copy ``root`` over a local connection (the demo inventory's
    gpu-incident has no other variable: tests/integration/test_console_output.py checks it)."""
    host = {"ansible_connection": "local", "ansible_python_interpreter": shutil.which("python3"), "gpuhost_root": root}
    host.update(hostvars)
    return {"all": {"hosts": {"gpu-incident": host}}}
