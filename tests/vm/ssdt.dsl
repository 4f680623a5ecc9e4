/*
 * Extra ACPI table for the test guests (passed with -acpitable file=ssdt.aml).
 *
 * QEMU describes its CPUs (\_SB.CPUS.C000, C001: Processor objects on q35) without
 * any power management, so a guest kernel would run with no cpuidle driver and no
 * cpufreq driver. The incident host ran acpi_idle with a deep C2 and acpi-cpufreq;
 * this table gives every CPU the same, so the idle-state and governor rules and
 * fixes act on a real kernel.
 *
 * _CST: two states, both entered with HLT (FFixedHW, class 1, bit offset 0 =
 *       "halt"). Linux names acpi_idle states by their position in _CST, so the
 *       second entry is the guest's "C2", with a 400 us worst-case latency: above
 *       the baseline's 100 us bound, the "deep" state the fix must disable.
 *       Both are declared as ACPI type C1 on purpose:
 *       - a type-C2 FFixedHW entry is an MWAIT hint, and Linux drops it unless
 *         CPUID leaf 5 lists MWAIT sub-states, which TCG CPUs do not ("declares
 *         FIXED_HARDWARE C-state but not supported in hardware, skip");
 *       - a type-C2 SystemIO entry (a P_LVL2 port read) never halts under QEMU,
 *         so the idle guest would spin both host cores.
 *       Only a C1-type entry falls back to HLT, which TCG really halts on.
 * _PCT/_PSS: two SystemIO P-states on ports nothing decodes (writes ignored);
 *       enough for acpi-cpufreq to register. It refuses SystemIO P-states on CPU
 *       family 15 (K8 must use powernow-k8), hence -cpu max,family=16.
 */
DefinitionBlock ("ssdt.aml", "SSDT", 2, "GPUHST", "CPUPM", 0x00000001)
{
    External (\_SB.CPUS.C000, ProcessorObj)
    External (\_SB.CPUS.C001, ProcessorObj)

    Scope (\_SB)
    {
        /* Shared by both CPUs: one table of states, returned by each CPU's methods. */
        Name (CSTT, Package ()
        {
            2,
            Package ()
            {
                /* C1: FFixedHW, class 1, bit offset 0: HLT */
                ResourceTemplate () { Register (FFixedHW, 0x01, 0x00, 0x0000000000000000, 0x01, ) },
                1,      /* type C1 */
                1,      /* worst-case latency, us */
                1000    /* average power, mW */
            },
            Package ()
            {
                /* "C2": FFixedHW HLT as well, see above for why its type is C1 */
                ResourceTemplate () { Register (FFixedHW, 0x01, 0x00, 0x0000000000000000, 0x01, ) },
                1,      /* type C1 (HLT); the guest lists it as state C2 */
                400,    /* worst-case latency, us: above the 100 us bound */
                500
            }
        })

        Name (PCTT, Package ()
        {
            ResourceTemplate () { Register (SystemIO, 0x10, 0x00, 0x0000000000000E00, , ) },   /* control */
            ResourceTemplate () { Register (SystemIO, 0x10, 0x00, 0x0000000000000E02, , ) }    /* status */
        })

        Name (PSST, Package ()
        {
            /* core MHz, power mW, transition latency us, bus-master latency us, control, status */
            Package () { 2000, 15000, 10, 10, 0x00, 0x00 },
            Package () { 1000, 8000, 10, 10, 0x01, 0x01 }
        })
    }

    Scope (\_SB.CPUS.C000)
    {
        Method (_CST, 0, NotSerialized) { Return (\_SB.CSTT) }
        Method (_PCT, 0, NotSerialized) { Return (\_SB.PCTT) }
        Method (_PSS, 0, NotSerialized) { Return (\_SB.PSST) }
        Method (_PPC, 0, NotSerialized) { Return (Zero) }
    }

    Scope (\_SB.CPUS.C001)
    {
        Method (_CST, 0, NotSerialized) { Return (\_SB.CSTT) }
        Method (_PCT, 0, NotSerialized) { Return (\_SB.PCTT) }
        Method (_PSS, 0, NotSerialized) { Return (\_SB.PSST) }
        Method (_PPC, 0, NotSerialized) { Return (Zero) }
    }
}
