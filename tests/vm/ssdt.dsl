/*
 * Extra ACPI table for the test guests (passed with -acpitable file=ssdt.aml).
 *
 * QEMU describes its CPUs (\_SB.CPUS.C000, C001: Processor objects on q35) without
 * any power management, so a guest kernel would run with no cpuidle driver and no
 * cpufreq driver. The incident host ran acpi_idle with a deep C2 and acpi-cpufreq;
 * this table gives every CPU the same, so the idle-state and governor rules and
 * fixes act on a real kernel.
 *
 * _CST: C1 and C2 both use a Functional Fixed Hardware register. An I/O-port C2
 *       (SystemIO P_LVL2 read) never halts under QEMU, so an idle guest would spin
 *       both host cores; FFixedHW entries end in HLT/MWAIT, which TCG halts on.
 *       C2's 400 us worst-case latency puts it above the baseline's 100 us bound:
 *       the "deep" state the fix must disable.
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
                /* C1: FFixedHW, class 1 (native C-state), bit offset 2, hint 0x00 */
                ResourceTemplate () { Register (FFixedHW, 0x01, 0x02, 0x0000000000000000, 0x01, ) },
                1,      /* type C1 */
                1,      /* worst-case latency, us */
                1000    /* average power, mW */
            },
            Package ()
            {
                /* C2: FFixedHW, MWAIT hint 0x10 (C2 sub-state 0) */
                ResourceTemplate () { Register (FFixedHW, 0x01, 0x02, 0x0000000000000010, 0x01, ) },
                2,      /* type C2 */
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
